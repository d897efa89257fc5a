// Package layers holds the test that keeps Legate's packages in their layers (docs/DESIGN.md):
// a package imports only packages of its own layer or below. It has no code of its own.
package layers
