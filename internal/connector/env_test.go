package connector

import (
	"github.com/ehsink/ehsink/source"
	"strings"
	"testing"
	"time"
)

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c *Config)
	}{
		{"by name, with - read as _", map[string]string{"EHSINK_CONNECTORS__ORDERS_TO_FAKE__SINK__TABLE": "orders_v2"},
			func(t *testing.T, c *Config) {
				if got := c.Connectors[0].Sink.Config.(*fakeConfig).Table; got != "orders_v2" {
					t.Errorf("table = %q", got)
				}
			}},
		{"by index, typed from a string", map[string]string{
			"EHSINK_CONNECTORS__1__SOURCE__BATCH__MAX_EVENTS": "42",
			"EHSINK_CONNECTORS__1__SOURCE__BATCH__MAX_WAIT":   "250ms",
		}, func(t *testing.T, c *Config) {
			if b := c.Connectors[1].Source.Batch; b != (source.Batch{MaxEvents: 42, MaxWait: 250 * time.Millisecond, MinEvents: 1}) {
				t.Errorf("batch = %+v", b)
			}
		}},
		{"top level and a new key", map[string]string{
			"EHSINK_DRAIN_TIMEOUT":                           "3s",
			"EHSINK_CONNECTORS__PAYMENTS__SINK__DSN":         "${PG_DSN}",
			"EHSINK_EMULATOR__HUBS__REFUNDS":                 "3",
			"EHSINK_CONNECTORS__payments__ERRORS__TOLERANCE": "none",
		}, func(t *testing.T, c *Config) {
			if c.DrainTimeout != 3*time.Second {
				t.Errorf("drain_timeout = %s", c.DrainTimeout)
			}
			if got := c.Connectors[1].Sink.Config.(*fakeConfig).DSN.Reveal(); got != testDSN {
				t.Errorf("dsn not expanded from the override")
			}
			if c.Emulator.Hubs["refunds"] != 3 || c.Emulator.Hubs["orders"] != 4 {
				t.Errorf("hubs = %v", c.Emulator.Hubs)
			}
			if c.Connectors[1].Errors.Tolerance != "none" {
				t.Errorf("tolerance = %q", c.Connectors[1].Errors.Tolerance)
			}
		}},
		{"flow values and existing map keys keep their case", map[string]string{
			"EHSINK_CONNECTORS__0__SINK__COLUMNS":               "{id: $.id}",
			"EHSINK_CONNECTORS__0__SOURCE__START_PARTITIONS__1": "latest",
			"EHSINK_EMULATOR__CONSUMER_GROUPS":                  "[audit, replay]",
		}, func(t *testing.T, c *Config) {
			if cols := c.Connectors[0].Sink.Config.(*fakeConfig).Columns; len(cols) != 1 || cols["id"] != "$.id" {
				t.Errorf("columns = %v", cols)
			}
			if sp := c.Connectors[0].Source.StartPartitions; sp["1"] != "latest" || sp["0"] != "latest" {
				t.Errorf("start_partitions = %v", sp)
			}
			if g := c.Emulator.ConsumerGroups; len(g) != 2 || g[1] != "replay" {
				t.Errorf("consumer_groups = %v", g)
			}
		}},
		{"a new connector by appending", map[string]string{
			"EHSINK_CONNECTORS__2__NAME":               "third",
			"EHSINK_CONNECTORS__2__SOURCE__CONNECTION": "emulator",
			"EHSINK_CONNECTORS__2__SOURCE__EVENTHUB":   "payments",
			"EHSINK_CONNECTORS__2__SINK__TYPE":         "nullsink",
			"EHSINK_CONNECTORS__2__SINK__TABLE":        "t3",
		}, func(t *testing.T, c *Config) {
			if len(c.Connectors) != 3 || c.Connectors[2].Name != "third" || c.Connectors[2].Sink.Type != "nullsink" {
				t.Errorf("connectors = %+v", c.Connectors)
			}
		}},
		{"unrelated EHSINK_ variables are ignored", map[string]string{
			"EHSINK_TEST_POSTGRES_DSN": testDSN,
			"EHSINK_LOG_LEVEL":         "debug",
		}, func(t *testing.T, c *Config) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("testdata/connectors.yaml", testEnv(tt.env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{"unknown connector", map[string]string{"EHSINK_CONNECTORS__NOPE__SINK__TABLE": "x"},
			map[string]string{"EHSINK_CONNECTORS__NOPE__SINK__TABLE": `connectors: no item named "nope" (names: orders-to-fake, payments; or use an index)`}},
		{"index out of range", map[string]string{"EHSINK_CONNECTORS__7__NAME": "x"},
			map[string]string{"EHSINK_CONNECTORS__7__NAME": "no item 7 (the list has 2)"}},
		{"typo is caught by the decoder", map[string]string{"EHSINK_CONNECTORS__0__SOURCE__BATCH__MAX_EVNTS": "1"},
			map[string]string{"connectors[0].source.batch.max_evnts": "did you mean max_events?"}},
		{"bad value", map[string]string{"EHSINK_CONNECTORS__0__SOURCE__PREFETCH": "lots"},
			map[string]string{"connectors[0].source.prefetch": `expected an integer, got the string "lots"`}},
		{"bad flow value", map[string]string{"EHSINK_EMULATOR__CONSUMER_GROUPS": "[a, b"},
			map[string]string{"EHSINK_EMULATOR__CONSUMER_GROUPS": "not a YAML flow list or map"}},
		{"empty segment", map[string]string{"EHSINK_CONNECTORS__0____NAME": "x"},
			map[string]string{"EHSINK_CONNECTORS__0____NAME": "empty segment"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("testdata/connectors.yaml", testEnv(tt.env))
			assertProblems(t, err, tt.want)
		})
	}
}

func TestEnvOverridesNotReadWhenGetenvIsInjected(t *testing.T) {
	t.Setenv("EHSINK_DRAIN_TIMEOUT", "not a duration")
	opts := testEnv(nil)
	opts.Environ = nil
	c, err := Load("testdata/connectors.yaml", opts)
	if err != nil {
		t.Fatalf("Load read the process environment: %v", err)
	}
	if c.DrainTimeout != 10*time.Second {
		t.Errorf("drain_timeout = %s", c.DrainTimeout)
	}
	// With neither set, the process environment is used.
	_, err = Load("testdata/connectors.yaml", LoadOptions{Registry: testRegistry()})
	if err == nil || !strings.Contains(err.Error(), "drain_timeout") {
		t.Errorf("process environment not used: %v", err)
	}
}
