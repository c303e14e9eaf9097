package source_test

import "github.com/ehsink/ehsink/internal/secret"

func secretOf(s string) secret.String { return secret.String(s) }
