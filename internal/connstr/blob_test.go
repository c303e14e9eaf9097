package connstr

import (
	"strings"
	"testing"
)

// TestBlob: exactly one of a connection string and an account URL, each
// checked, the problem named by its field; an account URL carries no
// container, except as the emulator's path-style account on a loopback
// host.
func TestBlob(t *testing.T) {
	const conn = "AccountName=acct;AccountKey=a2V5"
	for _, c := range []struct{ conn, url, field, want string }{
		{conn, "", "", ""},
		{"", "https://acct.blob.core.windows.net", "", ""},
		{"", "https://acct.blob.core.windows.net/", "", ""},
		{"", "https://127.0.0.1:10000/devstoreaccount1", "", ""},
		{"", "http://localhost:10000/devstoreaccount1", "", ""},
		{"", "", "connection", "required"},
		{conn, "https://acct.blob.core.windows.net", "account_url", "not both"},
		{"AccountName=a;AccountKey=", "", "connection", "AccountKey"},
		{"", "https://acct.blob.core.windows.net/lake", "account_url", "without a container"},
		{"", "acct.blob.core.windows.net", "account_url", "https://ACCOUNT.blob.core.windows.net"},
		{"", "ftp://acct.blob.core.windows.net", "account_url", "https://ACCOUNT.blob.core.windows.net"},
		{"", "https://acct.blob.core.windows.net?sv=x&sig=y", "account_url", "https://ACCOUNT.blob.core.windows.net"},
	} {
		field, err := Blob(c.conn, c.url)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Blob(%q, %q): %s: %v, want no error", c.conn, c.url, field, err)
		case c.want != "" && (err == nil || field != c.field || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Blob(%q, %q) = %q, %v; want %s: ...%s...", c.conn, c.url, field, err, c.field, c.want)
		}
	}
}
