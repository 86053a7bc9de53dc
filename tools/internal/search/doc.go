// Package search holds the engines behind the glob and grep tools: a
// gitignore implementation, a glob matcher and walker, and a parallel,
// line-oriented regular-expression search.
//
// The package never touches the filesystem itself. It walks an [FS], which
// the confinement layer implements with its race-safe file access: an FS
// reports symlinks as [Symlink] entries and never follows them, and entries
// the policy denies never appear. Because the walk can only descend into
// entries an FS reports as [Dir], a symlinked directory or a symlink loop
// cannot pull a search outside the tree or keep it from terminating.
//
// # Paths
//
// Every path an FS is asked about, and every path in a result, is relative
// to the search root, uses "/" as separator, and never contains "." or ".."
// components ("" is the root itself). Entry names an FS returns that are not
// plain names (empty, ".", "..", containing "/" or NUL) are dropped.
//
// # Order
//
// Results are in tree order: a depth-first walk with each directory's
// entries sorted by name (byte order), a directory before its contents. This
// is the same as sorting paths component by component, so "a/b" comes before
// "a-c" even though "a-c" < "a/b" as plain strings. Output is deterministic
// for a given tree, whatever the parallelism.
//
// # Bounds
//
// Every walk is bounded: by a result limit (with a Truncated flag), by the
// number of directories read and by the number of entries read per
// directory. Regular expressions use RE2 syntax (package regexp) and run in
// time linear in the input, so no pattern can make a search hang.
//
// # Ignore rules
//
// Unless an option turns them off, walks honour gitignore(5) rules: the
// .gitignore and .ignore files of every directory on the way (an .ignore
// file wins over the .gitignore next to it), .git/info/exclude at the root,
// and .git entries, which are always ignored. The user's global
// core.excludesFile is not read: it lies outside the tree.
package search
