package emulator

// Behavior: shared access authorization (with Config.Keys or
// Config.Policies; without either every token, login and link is allowed).
//
// put-token on $cbs verifies a SharedAccessSignature token (whatever the
// request's type says): skn names a configured policy, sig is the
// HMAC-SHA256 of "sr\nse" under its key, se is not past (se "0" never
// expires). A bad token answers 401 "InvalidSignature: ..." or
// "ExpiredToken: The token is expired. Expiration time: '...'", as the
// service does. A good one answers 202 and the connection keeps the claim
// under the request's name (its audience), replacing the previous claim
// for that audience: that is how the SDKs refresh tokens on live links.
//
// A claim covers the entities under the token's sr path (scheme and host
// are ignored, names compare case-insensitively as on the service; an sr
// naming only the namespace covers every hub) and, for a policy scoped to
// one event hub, only that hub. Its rights are the policy's; Manage
// implies Send and Listen.
//
// Attach: a sender link needs a claim with Send on its entity, a receiver
// link Listen, else the attach is refused with amqp:unauthorized-access
// "Unauthorized access. 'Send' claim(s) are required to perform this
// operation. Resource: '...'." $management READ requests need a claim
// with any right on "<hub>/$management" (the service serves runtime
// information to Send and Listen policies alike) or a valid
// security_token application property, else status 401. When a claim
// expires and no refreshed claim covers a link, the link is detached
// with amqp:unauthorized-access.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
	"github.com/ehsink/ehsink/internal/secret"
)

// Rights are the claims a shared access policy grants.
type Rights uint8

// The rights of Event Hubs shared access policies.
const (
	RightListen Rights = 1 << iota
	RightSend
	RightManage
	// allRights is Manage, Send and Listen.
	allRights = RightListen | RightSend | RightManage
)

var rightNames = []struct {
	r    Rights
	name string
}{{RightManage, "Manage"}, {RightSend, "Send"}, {RightListen, "Listen"}}

// String lists the rights as "Manage,Send,Listen".
func (r Rights) String() string {
	var out []string
	for _, n := range rightNames {
		if r&n.r != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ",")
}

// ParseRights parses a comma-separated list of manage, send and listen
// (any case).
func ParseRights(s string) (Rights, error) {
	var r Rights
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		known := false
		for _, n := range rightNames {
			if strings.EqualFold(n.name, f) {
				r, known = r|n.r, true
			}
		}
		if !known {
			return 0, fmt.Errorf("unknown right %q (want manage, send or listen)", f)
		}
	}
	return r, nil
}

// has reports whether r grants need; Manage implies the others.
func (r Rights) has(need Rights) bool { return r&RightManage != 0 || r&need == need }

// Policy is a shared access policy: a named key with rights, on the
// namespace or on one event hub.
type Policy struct {
	// Name is the key name (SharedAccessKeyName).
	Name string
	// Key is the key (SharedAccessKey).
	Key secret.String
	// Rights are what tokens signed with Key may do. If zero, AllRights.
	Rights Rights
	// EventHub scopes the policy to one event hub, as an entity-level
	// policy on the service. If empty, the policy covers the namespace.
	EventHub string
}

// policies merges Keys (namespace policies with all rights) and Policies.
func (c Config) policies() map[string]Policy {
	out := map[string]Policy{}
	for name, key := range c.Keys {
		out[name] = Policy{Name: name, Key: key, Rights: allRights}
	}
	for _, p := range c.Policies {
		if p.Rights == 0 {
			p.Rights = allRights
		}
		out[p.Name] = p
	}
	return out
}

func (c Config) validatePolicies() []error {
	var errs []error
	for name, key := range c.Keys {
		if name == "" || key == "" {
			errs = append(errs, errors.New("keys: key names and keys must be non-empty"))
			break
		}
	}
	seen := map[string]bool{}
	for i, p := range c.Policies {
		switch {
		case p.Name == "" || p.Key == "":
			errs = append(errs, fmt.Errorf("policies[%d]: name and key are required", i))
		case seen[p.Name] || c.Keys[p.Name] != "":
			errs = append(errs, fmt.Errorf("policies[%d]: key name %q is declared twice", i, p.Name))
		}
		seen[p.Name] = true
		if p.Rights&^allRights != 0 {
			errs = append(errs, fmt.Errorf("policies[%d].rights: unknown bits %#x", i, uint8(p.Rights)))
		}
	}
	return errs
}

// claim is what one accepted put-token grants on a connection.
type claim struct {
	resource string    // the token's sr path, lower-case; "" is the whole namespace
	hub      string    // the policy's event hub, lower-case; "" for namespace policies
	rights   Rights    // the policy's rights
	expires  time.Time // zero: never
}

// covers reports whether the claim allows need on entity (a lower-case
// path such as "orders/consumergroups/$default/partitions/0") at now.
func (cl claim) covers(entity string, need Rights, now time.Time) bool {
	if !cl.expires.IsZero() && !now.Before(cl.expires) {
		return false
	}
	return within(entity, cl.resource) && within(entity, cl.hub) && cl.rights.has(need)
}

// within reports whether path is prefix itself or under it.
func within(path, prefix string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// entityPath turns an address or audience ("amqps://host:5671/Orders/",
// "sb://ns/orders", "orders/Partitions/0") into a lower-case path without
// scheme, host or outer slashes.
func entityPath(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		rest := addr[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return ""
		}
		addr = rest[j+1:]
	}
	return strings.ToLower(strings.Trim(addr, "/"))
}

// authEnabled reports whether tokens are checked at all.
func (s *Server) authEnabled() bool { return len(s.policies) > 0 }

// checkPlain validates a SASL PLAIN response ("authzid\0user\0password")
// against the policies; with none every login passes.
func (s *Server) checkPlain(resp []byte) bool {
	if !s.authEnabled() {
		return true
	}
	parts := strings.Split(string(resp), "\x00")
	if len(parts) != 3 {
		return false
	}
	p, ok := s.policies[parts[1]]
	return ok && hmac.Equal([]byte(p.Key.Reveal()), []byte(parts[2]))
}

// verifyToken checks a SharedAccessSignature token against the policies.
// It returns the claim it grants, or the service's 401 description.
func (s *Server) verifyToken(token string, now time.Time) (claim, string) {
	const prefix = "SharedAccessSignature "
	if !strings.HasPrefix(token, prefix) {
		return claim{}, "InvalidSignature: the token is not a SharedAccessSignature (the emulator verifies SAS tokens only)."
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(token, prefix), "&") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	p, ok := s.policies[fields["skn"]]
	if !ok {
		return claim{}, fmt.Sprintf("InvalidSignature: unknown SharedAccessKeyName '%s'.", fields["skn"])
	}
	sig, err := url.QueryUnescape(fields["sig"])
	if err != nil {
		return claim{}, "InvalidSignature: the signature is not URL-encoded."
	}
	mac := hmac.New(sha256.New, []byte(p.Key.Reveal()))
	mac.Write([]byte(fields["sr"] + "\n" + fields["se"]))
	if !hmac.Equal([]byte(base64.StdEncoding.EncodeToString(mac.Sum(nil))), []byte(sig)) {
		return claim{}, "InvalidSignature: The token has an invalid signature."
	}
	se, err := strconv.ParseInt(fields["se"], 10, 64)
	if err != nil {
		return claim{}, "InvalidSignature: the expiry is not a number."
	}
	cl := claim{hub: strings.ToLower(p.EventHub), rights: p.Rights}
	if se != 0 {
		cl.expires = time.Unix(se, 0)
		if !now.Before(cl.expires) {
			return claim{}, fmt.Sprintf("ExpiredToken: The token is expired. Expiration time: '%s'.", cl.expires.UTC().Format("2006-01-02 15:04:05Z"))
		}
	}
	sr, err := url.QueryUnescape(fields["sr"])
	if err != nil {
		return claim{}, "InvalidSignature: the resource is not URL-encoded."
	}
	cl.resource = entityPath(sr)
	return cl, ""
}

// maxClaims bounds the claims one connection keeps (one per audience it
// put a token for); expired ones are dropped first.
const maxClaims = 4096

// putClaim stores a claim under its audience and re-arms the expiry
// check. It returns false when the connection holds too many claims.
func (c *conn) putClaim(audience string, cl claim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := entityPath(audience)
	if _, ok := c.claims[key]; !ok && len(c.claims) >= maxClaims {
		now := time.Now()
		maps.DeleteFunc(c.claims, func(_ string, cl claim) bool { return !cl.expires.IsZero() && !now.Before(cl.expires) })
		if len(c.claims) >= maxClaims {
			return false
		}
	}
	if c.claims == nil {
		c.claims = map[string]claim{}
	}
	c.claims[key] = cl
	c.armExpiryLocked()
	return true
}

// authorizedLocked reports whether some claim of the connection allows
// need on entity at now.
func (c *conn) authorizedLocked(entity string, need Rights, now time.Time) bool {
	for _, cl := range c.claims {
		if cl.covers(entity, need, now) {
			return true
		}
	}
	return false
}

// unauthorized is the service's refusal for a missing claim.
func (s *Server) unauthorized(c *conn, entity string, need Rights) string {
	return fmt.Sprintf("Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: 'sb://%s/%s'.",
		need, c.nc.LocalAddr(), entity)
}

// authorizeLink checks, at attach, that the connection holds a claim with
// need on addr, and records what the link needs so expiry re-checks it.
func (s *Server) authorizeLink(l *link, addr string, need Rights) *amqp.Error {
	if !s.authEnabled() {
		return nil
	}
	c := l.s.c
	entity := entityPath(addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.authorizedLocked(entity, need, time.Now()) {
		return &amqp.Error{Condition: amqp.ErrUnauthorized, Description: s.unauthorized(c, entity, need)}
	}
	l.authEntity, l.authNeed = entity, need
	return nil
}

// authorizeManagement checks a $management request for hubName: a valid
// security_token property or a claim on "<hub>/$management" with any
// right. It returns "" when allowed, else the 401 description.
func (s *Server) authorizeManagement(c *conn, hubName string, props map[string]any) string {
	if !s.authEnabled() {
		return ""
	}
	entity := strings.ToLower(hubName) + "/$management"
	now := time.Now()
	ok := func(cl claim) bool {
		return cl.covers(entity, RightListen, now) || cl.covers(entity, RightSend, now)
	}
	if tok, _ := props["security_token"].(string); tok != "" {
		cl, reason := s.verifyToken(tok, now)
		if reason != "" {
			return reason
		}
		if ok(cl) {
			return ""
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.ContainsFunc(slices.Collect(maps.Values(c.claims)), ok) {
		return ""
	}
	return s.unauthorized(c, entity, RightListen)
}

// armExpiryLocked schedules checkExpiry for the earliest future claim
// expiry, replacing any earlier schedule.
func (c *conn) armExpiryLocked() {
	var next time.Time
	for _, cl := range c.claims {
		if !cl.expires.IsZero() && (next.IsZero() || cl.expires.Before(next)) {
			next = cl.expires
		}
	}
	if c.authTimer != nil {
		c.authTimer.Stop()
		c.authTimer = nil
	}
	if next.IsZero() || c.closing {
		return
	}
	c.authTimer = time.AfterFunc(time.Until(next), c.checkExpiry)
}

// checkExpiry runs when a claim expires: it drops expired claims and
// detaches every link no remaining claim covers. It runs on the timer's
// goroutine and returns at once on a closing connection.
func (c *conn) checkExpiry() {
	now := time.Now()
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	expired := map[string]claim{}
	for k, cl := range c.claims {
		if !cl.expires.IsZero() && !now.Before(cl.expires) {
			expired[k] = cl
			delete(c.claims, k)
		}
	}
	var lost []*link
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.authNeed != 0 && !l.detached && !c.authorizedLocked(l.authEntity, l.authNeed, now) {
				lost = append(lost, l)
			}
		}
	}
	c.armExpiryLocked()
	c.mu.Unlock()
	for _, l := range lost {
		var at time.Time
		for _, cl := range expired {
			if within(l.authEntity, cl.resource) && (at.IsZero() || cl.expires.After(at)) {
				at = cl.expires
			}
		}
		desc := "ExpiredToken: The token is expired. Expiration time: '" + at.UTC().Format("2006-01-02 15:04:05Z") + "'."
		if at.IsZero() {
			desc = c.srv.unauthorized(c, l.authEntity, l.authNeed)
		}
		c.log.Info("detaching link: its token expired", "entity", l.authEntity)
		c.srv.expired.Add(1)
		l.detachWithError(&amqp.Error{Condition: amqp.ErrUnauthorized, Description: desc})
	}
}
