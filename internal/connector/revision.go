package connector

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/ehsink/ehsink/internal/config"
)

// Revision returns the configuration revision of s: the first 12 hex
// digits of the SHA-256 of the connector's effective spec as `ehsink
// validate --print` writes it (defaults filled in, secrets as ***). Two
// loads of one file give one revision, and a changed mapping, filter or
// route another, so a dead letter can say which configuration refused it.
// The source's connection and the checkpoint store are left out: they
// change nothing a letter's event becomes, and commands that reach neither
// (`ehsink deadletters`) load them without their secrets.
func (s *Spec) Revision() string {
	c := *s
	c.withDefaults()
	c.Source.Connection, c.Checkpoint = "", CheckpointSpec{}
	b, err := config.Marshal(&c)
	if err != nil {
		// A spec that loaded marshals; a hand-built one that does not
		// has no revision rather than a wrong one.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
