// Package apidoc holds the test that keeps the module's public API
// documented: every exported identifier of a package outside internal/
// directories (functions, methods of exported types, types, struct fields,
// interface methods, constants and variables) has a doc comment, and every
// such package has a package comment.
package apidoc
