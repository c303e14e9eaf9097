// Package connector holds the connector spec (the YAML types of
// connectors.yaml, their defaults and validation) and the runner that moves
// each owned partition through source -> dedupe -> sink -> checkpoint.
package connector
