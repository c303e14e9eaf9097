// Package deploy checks ehsink's deployment files: the Dockerfile at the
// repository root and the Kubernetes manifests under deploy/kubernetes.
//
// It is a module of its own so that the Kubernetes API types it decodes
// the manifests into never become dependencies of ehsink itself. Its tests
// build the binary with `make build-static` (the container's build step) and
// check the files against what that binary really serves and accepts.
package deploy
