// Package e2e runs the real legate binary: it builds it once, starts it on
// temporary configurations with port 0, finds the admin address in the file
// given by --admin-address-path, and drives it with real HTTP clients.
// Tests start their own processes and stop them by PID.
package e2e
