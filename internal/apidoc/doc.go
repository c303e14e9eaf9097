// Package apidoc holds the tests that keep the documentation true:
//
//   - every exported identifier of a package outside internal/ directories
//     (functions, methods of exported types, types, struct fields,
//     interface methods, constants and variables) has a doc comment, and
//     every such package has a package comment;
//   - docs/configuration.md has a row for every key of connectors.yaml
//     (connector.Config and each built-in sink's Config, walked with
//     config.KeyPaths) and no row for a key the spec does not have;
//   - the package map of docs/internals.md names every package of
//     `go list ./...` outside test/, and only those, and its list of
//     top-level directories matches the tree (at most 12);
//   - every ```yaml block of README.md and docs/*.md loads: a whole
//     connectors.yaml or test file as `ehsink validate` and `ehsink test`
//     read one, a part of a connector with no problem at a key it writes
//     (TestDocYAMLExamples), unless marked as another program's YAML;
//   - docs/configuration.md's "Avro events" names the one request a
//     connector makes of each registry type, and the code makes no other
//     (TestAvroRegistryRequests, against recording registries);
//   - the README is at most 300 lines, and the relative links and anchors of
//     the README and docs/ resolve.
package apidoc
