package emulator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/secret"
)

// sasToken signs a token for resource as the SDKs do.
func sasToken(resource, keyName, key string, expiry time.Time) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := strconv.FormatInt(expiry.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, keyName)
}

func keyConnStr(srv *Server, hubName, keyName, key string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;EntityPath=%s;UseDevelopmentEmulator=true", srv.Addr(), keyName, key, hubName)
}

func sasConnStr(srv *Server, hubName, token string) string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessSignature=%s;EntityPath=%s;UseDevelopmentEmulator=true", srv.Addr(), token, hubName)
}

// noRetry keeps refusals quick: attach failures are retried otherwise.
var noRetry = azeventhubs.RetryOptions{MaxRetries: -1}

// trySend attaches a sender and sends one event.
func trySend(ctx context.Context, connStr string) error {
	p, err := azeventhubs.NewProducerClientFromConnectionString(connStr, "", &azeventhubs.ProducerClientOptions{RetryOptions: noRetry})
	if err != nil {
		return err
	}
	defer p.Close(context.Background())
	b, err := p.NewEventDataBatch(ctx, nil)
	if err != nil {
		return err
	}
	if err := b.AddEventData(&azeventhubs.EventData{Body: []byte("x")}, nil); err != nil {
		return err
	}
	return p.SendEventDataBatch(ctx, b, nil)
}

// tryReceive attaches a receiver on partition 0 from the earliest event
// and waits for one event.
func tryReceive(ctx context.Context, connStr string) error {
	c, err := azeventhubs.NewConsumerClientFromConnectionString(connStr, "", azeventhubs.DefaultConsumerGroup, &azeventhubs.ConsumerClientOptions{RetryOptions: noRetry})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		return err
	}
	defer pc.Close(context.Background())
	_, err = pc.ReceiveEvents(ctx, 1, nil)
	return err
}

// tryProperties asks for the hub properties ($management).
func tryProperties(ctx context.Context, connStr string) error {
	c, err := azeventhubs.NewConsumerClientFromConnectionString(connStr, "", azeventhubs.DefaultConsumerGroup, &azeventhubs.ConsumerClientOptions{RetryOptions: noRetry})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.GetEventHubProperties(ctx, nil)
	return err
}

// TestSDKAuthorization: with policies configured the emulator refuses, with
// the service's codes and descriptions, what the real SDK must not be
// allowed to do, and allows the rest.
func TestSDKAuthorization(t *testing.T) {
	const key = "c2VjcmV0LWtleQ=="
	srv := startEmulator(t, Config{
		Hubs: []HubConfig{{Name: "orders", Partitions: 4}, {Name: "payments", Partitions: 2}},
		Keys: map[string]secret.String{"root": key},
		Policies: []Policy{
			{Name: "listen", Key: key, Rights: RightListen},
			{Name: "send", Key: key, Rights: RightSend},
			{Name: "orders-only", Key: key, EventHub: "orders"},
		},
	})
	// Something to receive on every hub's partition 0.
	for _, h := range []string{"orders", "payments"} {
		sendEvents(t, newProducer(t, srv, h), &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, "seed")
	}
	expired := sasToken("amqp://"+srv.Addr()+"/orders", "root", key, time.Now().Add(-10*time.Minute))
	ordersSAS := sasToken("amqp://"+srv.Addr()+"/orders", "root", key, time.Now().Add(time.Hour))

	type op func(context.Context, string) error
	cases := []struct {
		name    string
		connStr string
		do      op
		want    string // "" means allowed; else a substring of the error
	}{
		{"root sends", keyConnStr(srv, "orders", "root", key), trySend, ""},
		{"root receives", keyConnStr(srv, "orders", "root", key), tryReceive, ""},
		{"wrong key", keyConnStr(srv, "orders", "root", "d3Jvbmc="), trySend, "status code 401 and description: InvalidSignature: The token has an invalid signature."},
		{"unknown key name", keyConnStr(srv, "orders", "nobody", key), tryReceive, "status code 401 and description: InvalidSignature: unknown SharedAccessKeyName 'nobody'"},
		{"listen-only key cannot send", keyConnStr(srv, "orders", "listen", key), trySend, "Unauthorized access. 'Send' claim(s) are required to perform this operation"},
		{"listen-only key receives", keyConnStr(srv, "orders", "listen", key), tryReceive, ""},
		{"listen-only key reads properties", keyConnStr(srv, "orders", "listen", key), tryProperties, ""},
		{"send-only key cannot receive", keyConnStr(srv, "orders", "send", key), tryReceive, "Unauthorized access. 'Listen' claim(s) are required to perform this operation"},
		{"send-only key sends", keyConnStr(srv, "orders", "send", key), trySend, ""},
		{"hub policy on its hub", keyConnStr(srv, "Orders", "orders-only", key), trySend, ""},
		{"hub policy on another hub", keyConnStr(srv, "payments", "orders-only", key), trySend, "Unauthorized access. 'Send' claim(s) are required to perform this operation. Resource: 'sb://" + srv.Addr() + "/payments'"},
		{"hub policy reads another hub", keyConnStr(srv, "payments", "orders-only", key), tryProperties, "status code 401"},
		{"hub SAS on its hub", sasConnStr(srv, "orders", ordersSAS), tryReceive, ""},
		{"hub SAS on another hub", sasConnStr(srv, "payments", ordersSAS), tryReceive, "Unauthorized access. 'Listen' claim(s) are required to perform this operation. Resource: 'sb://" + srv.Addr() + "/payments/consumergroups/$default/partitions/0'"},
		{"expired SAS", sasConnStr(srv, "orders", expired), tryReceive, "status code 401 and description: ExpiredToken: The token is expired. Expiration time:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(testCtx(t), tc.connStr)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			// The SDK returns management (RPC) failures unclassified.
			var ehErr *azeventhubs.Error
			isRPC := strings.HasPrefix(tc.want, "status code")
			if !isRPC && (!errors.As(err, &ehErr) || ehErr.Code != azeventhubs.ErrorCodeUnauthorizedAccess) {
				t.Fatalf("got %v, want an azeventhubs.Error with code %s", err, azeventhubs.ErrorCodeUnauthorizedAccess)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestSDKTokenExpiryDetaches: a link whose token expires without a
// refresh is detached with amqp:unauthorized-access, which the SDK reports
// as fatal (a connection string with an embedded SAS is never refreshed).
func TestSDKTokenExpiryDetaches(t *testing.T) {
	const key = "c2VjcmV0LWtleQ=="
	srv := startEmulator(t, Config{Keys: map[string]secret.String{"root": key}})
	expiry := time.Unix(time.Now().Add(3*time.Second).Unix(), 0) // tokens count whole seconds
	tok := sasToken("amqp://"+srv.Addr()+"/orders", "root", key, expiry)
	c, err := azeventhubs.NewConsumerClientFromConnectionString(sasConnStr(srv, "orders", tok), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Latest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	ctx := testCtx(t)
	for {
		evs, err := pc.ReceiveEvents(ctx, 10, nil)
		if err == nil {
			t.Fatalf("received %d events nobody sent", len(evs))
		}
		var ehErr *azeventhubs.Error
		if errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeUnauthorizedAccess {
			if !strings.Contains(err.Error(), "ExpiredToken") || time.Now().Before(expiry) {
				t.Fatalf("detached at %s (expiry %s) with %v", time.Now(), expiry, err)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the link outlived its token: %v", err)
		}
	}
}

func TestParseRights(t *testing.T) {
	for in, want := range map[string]Rights{"listen": RightListen, "Send, LISTEN": RightSend | RightListen, "manage,send,listen": allRights} {
		if got, err := ParseRights(in); err != nil || got != want {
			t.Errorf("ParseRights(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "read", "send,"} {
		if _, err := ParseRights(in); err == nil {
			t.Errorf("ParseRights(%q) succeeded", in)
		}
	}
	if s := (RightSend | RightListen).String(); s != "Send,Listen" {
		t.Errorf("String() = %q", s)
	}
}

func TestPolicyValidation(t *testing.T) {
	bad := []Config{
		{Policies: []Policy{{Name: "a"}}},
		{Policies: []Policy{{Name: "a", Key: "k"}, {Name: "a", Key: "k"}}},
		{Keys: map[string]secret.String{"a": "k"}, Policies: []Policy{{Name: "a", Key: "k"}}},
		{Policies: []Policy{{Name: "a", Key: "k", Rights: 1 << 6}}},
		{TLS: &TLSOptions{KeyFile: "key.pem"}},
	}
	for i, cfg := range bad {
		if err := cfg.Validate(); err == nil {
			t.Errorf("config %d: Validate() = nil, want an error", i)
		}
	}
	good := Config{Keys: map[string]secret.String{"a": "k"}, Policies: []Policy{{Name: "b", Key: "k", Rights: RightListen, EventHub: "orders"}}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := good.policies(); p["a"].Rights != allRights || p["b"].Rights != RightListen || len(p) != 2 {
		t.Fatalf("policies() = %+v", p)
	}
}
