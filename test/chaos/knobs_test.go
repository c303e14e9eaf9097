package chaos_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// knobs are the settings of one matrix run, from the environment.
type knobs struct {
	mode       string // short or full
	events     int
	duration   time.Duration // how long the producer sends
	balancing  []string
	partitions int
	catchUp    time.Duration // bound on catching up after the producer stops
	checkRows  bool          // send rows PostgreSQL rejects (CHECK)
	seed       uint64
	keep       bool
	// load balancing of the replicas
	updateInterval, expiration time.Duration
}

func loadKnobs() (knobs, error) {
	k := knobs{
		mode:           "short",
		events:         24_000,
		duration:       75 * time.Second,
		balancing:      []string{"balanced", "greedy"},
		partitions:     8,
		catchUp:        90 * time.Second,
		checkRows:      true,
		seed:           uint64(time.Now().UnixNano()),
		updateInterval: 2 * time.Second,
		expiration:     10 * time.Second,
	}
	var errs []string
	bad := func(name string, err error) { errs = append(errs, fmt.Sprintf("%s: %v", name, err)) }
	if v := os.Getenv("EHSINK_CHAOS"); v != "" {
		switch v {
		case "short":
		case "full":
			k.mode, k.events, k.duration, k.catchUp = "full", 300_000, 6*time.Minute, 120*time.Second
		default:
			bad("EHSINK_CHAOS", fmt.Errorf("%q: want short or full", v))
		}
	}
	intKnob := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				bad(name, fmt.Errorf("%q: want a positive integer", v))
				return
			}
			*dst = n
		}
	}
	durKnob := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				bad(name, fmt.Errorf("%q: want a positive duration", v))
				return
			}
			*dst = d
		}
	}
	intKnob("EHSINK_CHAOS_EVENTS", &k.events)
	intKnob("EHSINK_CHAOS_PARTITIONS", &k.partitions)
	durKnob("EHSINK_CHAOS_DURATION", &k.duration)
	durKnob("EHSINK_CHAOS_CATCHUP", &k.catchUp)
	if v := os.Getenv("EHSINK_CHAOS_BALANCING"); v != "" {
		k.balancing = nil
		for _, s := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			if s != "balanced" && s != "greedy" {
				bad("EHSINK_CHAOS_BALANCING", fmt.Errorf("%q: want balanced, greedy or both", s))
			}
			k.balancing = append(k.balancing, s)
		}
		if v == "both" {
			k.balancing, errs = []string{"balanced", "greedy"}, errs[:len(errs)-1]
		}
	}
	if v := os.Getenv("EHSINK_CHAOS_CHECK_POISON"); v != "" {
		k.checkRows = v != "0" && v != "false"
	}
	if v := os.Getenv("EHSINK_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			bad("EHSINK_CHAOS_SEED", err)
		}
		k.seed = n
	}
	k.keep = os.Getenv("EHSINK_CHAOS_KEEP") == "1"
	if k.duration < 40*time.Second {
		bad("EHSINK_CHAOS_DURATION", fmt.Errorf("%s: the fault schedule needs at least 40s", k.duration))
	}
	if len(errs) > 0 {
		return k, fmt.Errorf("chaos knobs: %s", strings.Join(errs, "; "))
	}
	return k, nil
}
