// Package extensions is the list of extensions Legate is built with: New calls each extension
// package's Register, once, and returns the frozen registry.Registry that the loader, package
// config, the xDS client and the server read. Adding an extension is its own package with a
// Register function, and one line in New.
package extensions
