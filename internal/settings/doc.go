// Package settings reads the binaries' configuration from environment
// variables (the names users already deploy with) and from flags that mirror
// them, and rejects bad values with a message naming the variable or flag.
package settings
