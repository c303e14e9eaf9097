package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/faultproxy"
)

// The network-partition act of the matrix. Each replica reaches each of
// its dependencies (PostgreSQL, Blob Storage in Azurite, Event Hubs in the
// emulator) through a fault proxy of its own, so that one replica can be
// cut off while the others are not. After the process and server faults
// (act 1), the scenarios run one after the other while the producer keeps
// sending, and a monitor samples every sink's position: a partition whose
// sink does not advance while the hub is ahead of it is unread, whoever
// owns it. While a healthy replica exists, no partition may stay unread
// longer than its scenario's bound.

// The settings the bounds derive from (the replicas' configuration).
const (
	sinkTimeout = 5 * time.Second
	lagInterval = 2 * time.Second
	// pgMidTransaction is PostgreSQL's ReadyForQuery in a transaction:
	// the server waits for the client's next statement, holding its locks.
	pgMidTransaction = "Z\x00\x00\x00\x05T"
)

// noticeAfter is how long a cut replica takes to notice, by what it lost:
// a sink call times out (sink_timeout); Event Hubs is not reached once a
// partition-properties call does not answer within the lag interval (two
// intervals at worst); a replica that cannot renew its leases stops
// writing before they expire, and a killed one just stops, so the
// expiration itself is the wait.
var noticeAfter = map[string]time.Duration{"PostgreSQL": sinkTimeout, "Event Hubs": 2 * lagInterval, "Blob": 0, "process": 0}

// cutOff is one replica's loss of one dependency ("process": killed).
type cutOff struct {
	rep *replica
	dep string
}

// affects reports whether losing dep stops connector conn: the Parquet
// connector writes to local files and needs no PostgreSQL (the Iceberg
// connector's catalog is in PostgreSQL).
func affects(dep, conn string) bool {
	return dep != "PostgreSQL" || conn != connParquet && conn != connDelta
}

// bound is how long a partition of conn may go unread in sc, and false
// when no replica can serve conn meanwhile. The cut replica notices
// (noticeAfter), waits the ownership expiration (seeing the healthy
// replicas commit) and gives the partition up, and a healthy replica
// claims it at its next round, greedy and balanced alike (balanced took one
// partition per round before it took its share at once). For balanced the
// bound still allows a round per partition a healthy replica takes over (at
// most partitions / healthy replicas), as before: the longest stretch
// measured since was 27 s against 33 s for one round, too close to tighten
// on one run of the matrix. A round is up to 1.3 update intervals (the
// SDK's jitter). 10 s of slack cover what the formula leaves out, a second
// or two each: the last batch before the cut (a stretch starts at the last
// commit seen), the release and the claim's resume and sink Open, the
// first batch after, and the monitor's own one-second sampling, on two
// cores shared by three replicas of six connectors built with -race (8 s
// held with five connectors; with the sixth, greedy measured 26.2 s
// against 25 s, the same stretches 1 to 1.2 s longer).
func (h *harness) bound(sc scenario, conn string) (time.Duration, bool) {
	var notice time.Duration
	cut := map[*replica]bool{}
	for _, c := range sc.cuts {
		if affects(c.dep, conn) {
			cut[c.rep] = true
			notice = max(notice, noticeAfter[c.dep])
		}
	}
	healthy := replicas - len(cut)
	if healthy == 0 {
		return 0, false
	}
	rounds := 1
	if h.strategy == "balanced" {
		rounds = (h.k.partitions + healthy - 1) / healthy
	}
	return notice + h.k.expiration + time.Duration(rounds)*h.k.updateInterval*13/10 + 10*time.Second, true
}

// paths are one replica's fault proxies, one per dependency.
type paths struct{ pg, blob, eh *faultproxy.Proxy }

func (p paths) all() []*faultproxy.Proxy { return []*faultproxy.Proxy{p.pg, p.blob, p.eh} }

// wire starts r's fault proxies and writes its configuration, which
// reaches every dependency through them.
func (h *harness) wire(r *replica) error {
	pgURL, err := url.Parse(h.dsn)
	if err != nil || pgURL.Host == "" {
		return fmt.Errorf("the PostgreSQL DSN is not a URL with a host: %v", err)
	}
	blobURL, err := url.Parse(h.az.BlobEndpoint())
	if err != nil {
		return err
	}
	emuAddr := fmt.Sprintf("127.0.0.1:%d", h.emu.port)
	if !strings.Contains(h.emu.conn, "//"+emuAddr) {
		return fmt.Errorf("the emulator's connection string %q does not name %s", h.emu.conn, emuAddr)
	}
	for _, p := range []struct {
		dst    **faultproxy.Proxy
		target string
	}{{&r.net.pg, pgURL.Host}, {&r.net.blob, blobURL.Host}, {&r.net.eh, emuAddr}} {
		px, err := faultproxy.Start(p.target)
		if err != nil {
			return err
		}
		h.t.Cleanup(func() { px.Close() })
		*p.dst = px
	}
	dsn := *pgURL
	dsn.Host = r.net.pg.Addr()
	az := strings.ReplaceAll(h.az.ConnectionString(), "//"+blobURL.Host+"/", "//"+r.net.blob.Addr()+"/")
	r.cfg = filepath.Join(h.runDir, "connectors-"+r.name+".yaml")
	return os.WriteFile(r.cfg, []byte(h.config(dsn.String(), az, r.net.eh.Addr())), 0o600)
}

// scenario is one network partition of act 2.
type scenario struct {
	name string
	// cut applies the faults and returns what it cut and how to heal.
	cut func() (target string, heal func())
	// cuts says which replica loses what: the bounds derive from it.
	cuts []cutOff
	// degraded: slowed, not cut. Nothing notices a slow path and nothing
	// hands its partitions over, so they are not held to a bound while it
	// lasts, only to reading again within one after the heal.
	degraded bool
}

// scenarios returns the partitions of the mode, in order.
func (h *harness) scenarios() []scenario {
	r1, r2, r3 := h.reps[0], h.reps[1], h.reps[2]
	set := func(f faultproxy.Fault, ps ...*faultproxy.Proxy) func() {
		for _, p := range ps {
			p.Set(f)
		}
		return func() {
			for _, p := range ps {
				p.Heal()
			}
		}
	}
	blackhole := faultproxy.Fault{Blackhole: true}
	reset := faultproxy.Fault{Reset: true}
	midTx := faultproxy.Fault{BlackholeOnReply: []byte(pgMidTransaction)}
	dep := func(r *replica, name string) *faultproxy.Proxy {
		return map[string]*faultproxy.Proxy{"PostgreSQL": r.net.pg, "Blob": r.net.blob, "Event Hubs": r.net.eh}[name]
	}
	one := func(fault string, r *replica, d string, f faultproxy.Fault) scenario {
		return scenario{name: fault, cuts: []cutOff{{r, d}},
			cut: func() (string, func()) { return fault + " " + r.name + " " + d, set(f, dep(r, d)) }}
	}
	// both cuts two replicas off at once, each its own way.
	both := func(name string, a, b scenario) scenario {
		return scenario{name: name, cuts: append(slices.Clone(a.cuts), b.cuts...), cut: func() (string, func()) {
			ta, ha := a.cut()
			tb, hb := b.cut()
			return ta + " + " + tb, func() { ha(); hb() }
		}}
	}
	degraded := scenario{name: "latency 300ms, bandwidth 64 KiB/s", degraded: true, cuts: []cutOff{{r3, "Event Hubs"}, {r1, "Event Hubs"}}, cut: func() (string, func()) {
		h1 := set(faultproxy.Fault{Latency: 300 * time.Millisecond}, r3.net.all()...)
		h2 := set(faultproxy.Fault{Bandwidth: 64 << 10}, r1.net.all()...)
		return r3.name + " every dependency +300ms, " + r1.name + " every dependency 64 KiB/s", func() { h1(); h2() }
	}}
	rebalance := scenario{name: "blackhole during a rebalance", cuts: []cutOff{{r2, "process"}, {r3, "PostgreSQL"}}, cut: func() (string, func()) {
		// r2 is killed (its partitions move), and r3's PostgreSQL is cut
		// while they do; r2 comes back 5 s later, moving them again.
		r2.busy.Lock()
		r2.kill9Locked()
		heal := set(blackhole, r3.net.pg)
		go func() {
			defer r2.busy.Unlock()
			h.sleep(5 * time.Second)
			if err := r2.startLocked(); err != nil {
				h.fail("restarting %s in a rebalance: %v", r2.name, err)
			}
		}()
		return "kill -9 " + r2.name + " (back after 5s) + blackhole " + r3.name + " PostgreSQL", heal
	}}
	if h.k.mode == "short" {
		return []scenario{
			both("two replicas, two dependencies", one("blackhole mid-transaction", r1, "PostgreSQL", midTx), one("blackhole", r2, "Blob", blackhole)),
			both("Event Hubs and PostgreSQL", one("blackhole", r3, "Event Hubs", blackhole), one("reset", r1, "PostgreSQL", reset)),
			rebalance,
		}
	}
	return []scenario{
		one("blackhole", r1, "PostgreSQL", blackhole),
		one("blackhole", r2, "Blob", blackhole),
		one("blackhole", r3, "Event Hubs", blackhole),
		one("blackhole mid-transaction", r1, "PostgreSQL", midTx),
		both("resets", one("reset", r2, "PostgreSQL", reset), one("reset", r3, "Event Hubs", reset)),
		degraded,
		both("two replicas, two dependencies", one("blackhole", r1, "PostgreSQL", blackhole), one("blackhole", r2, "Blob", blackhole)),
		rebalance,
		{name: "every replica cut from PostgreSQL", cuts: []cutOff{{r1, "PostgreSQL"}, {r2, "PostgreSQL"}, {r3, "PostgreSQL"}},
			cut: func() (string, func()) {
				return "blackhole r1, r2, r3 PostgreSQL", set(blackhole, r1.net.pg, r2.net.pg, r3.net.pg)
			}},
	}
}

// Each partition lasts hold; the next starts gap after its heal.
const (
	hold = 30 * time.Second
	gap  = 10 * time.Second
)

// act2Length is how long the partitions run, for the producer's schedule.
func (h *harness) act2Length() time.Duration { return actLength(h.k) }

func actLength(k knobs) time.Duration {
	n := 3
	if k.mode != "short" {
		n = 9
	}
	return time.Duration(n) * (hold + gap)
}

// stretch is a time a partition of a connector went unread: its sink did
// not advance while the hub was ahead of it.
type stretch struct {
	conn, part string
	from, to   time.Time
	sinkFrom   int64 // the sink's position when it last advanced before
	sinkTo     int64 // and when the stretch ended
}

func (s stretch) length() time.Duration { return s.to.Sub(s.from) }

// unreadMonitor samples the sinks' positions and the hub's.
type unreadMonitor struct {
	h         *harness
	mu        sync.Mutex  // guards the fields below
	stretches []stretch   // closed stretches longer than a few samples
	blind     []blindSpot // times the monitor could not look
}

// blindSpot is a time the monitor's samples failed.
type blindSpot struct {
	from, to time.Time
	err      error
}

// unseen reports whether s spans a blind spot: its length is not known.
func (m *unreadMonitor) unseen(s stretch) bool {
	for _, b := range m.blind {
		if !b.to.Before(s.from) && !b.from.After(s.to) {
			return true
		}
	}
	return false
}

// run samples every second until ctx ends.
func (m *unreadMonitor) run(ctx context.Context) {
	h := m.h
	seen := map[string]map[string]int64{} // each sink's position at its last advance
	since := map[string]map[string]time.Time{}
	start := time.Now()
	for _, c := range connectors {
		seen[c], since[c] = map[string]int64{}, map[string]time.Time{}
		for _, p := range h.parts {
			seen[c][p], since[c][p] = -2, start
		}
	}
	closeAt := func(c, p string, now time.Time, sink int64) {
		if s := (stretch{conn: c, part: p, from: since[c][p], to: now, sinkFrom: seen[c][p], sinkTo: sink}); s.length() > 3*time.Second {
			m.mu.Lock()
			m.stretches = append(m.stretches, s)
			m.mu.Unlock()
		}
		since[c][p] = now
	}
	// Not the verify group: it is the read-back's (and the emulator
	// defect the read-back met may be tied to a group's state).
	hubs := map[string]*azeventhubs.ConsumerClient{}
	for _, name := range []string{hubName, avroHub} {
		hub, err := azeventhubs.NewConsumerClientFromConnectionString(h.emu.hubConn(name), "", azeventhubs.DefaultConsumerGroup, nil)
		if err != nil {
			h.fail("partitions' monitor: %v", err)
			return
		}
		defer hub.Close(context.Background())
		hubs[name] = hub
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastOK, lastErr := time.Now(), error(nil)
	for {
		select {
		case <-ctx.Done():
			now := time.Now()
			for _, c := range connectors {
				for _, p := range h.parts {
					closeAt(c, p, now, seen[c][p])
				}
			}
			return
		case <-tick.C:
		}
		lasts, pos, err := h.sample(ctx, hubs)
		if err != nil {
			lastErr = err
			continue
		}
		if gap := time.Since(lastOK); gap > 3*time.Second {
			// What happened meanwhile was not seen: a stretch across it is
			// not judged (and the gap is reported).
			m.mu.Lock()
			m.blind = append(m.blind, blindSpot{from: lastOK, to: time.Now(), err: lastErr})
			m.mu.Unlock()
		}
		lastOK = time.Now()
		now := time.Now()
		for _, c := range connectors {
			last := lasts[hubOf(c)]
			for _, p := range h.parts {
				s := pos[c][p].sink
				if s > seen[c][p] || s >= last[p] {
					closeAt(c, p, now, s)
					seen[c][p] = s
				}
			}
		}
	}
}

// sample reads the hubs' ends and the sinks' positions at once: one
// after the other, a sample on a loaded machine outlasted the monitor's
// 3 s between looks.
func (h *harness) sample(ctx context.Context, hubs map[string]*azeventhubs.ConsumerClient) (map[string]map[string]int64, map[string]map[string]progress, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	lasts := map[string]map[string]int64{}
	var errs []error
	for name, hub := range hubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last, err := h.hubLastWith(ctx, hub)
			mu.Lock()
			defer mu.Unlock()
			lasts[name] = last
			if err != nil {
				errs = append(errs, fmt.Errorf("hub %s: %w", name, err))
			}
		}()
	}
	pos, err := h.sinkPositions(ctx)
	wg.Wait()
	return lasts, pos, errors.Join(append(errs, err)...)
}

// longest returns the longest stretch of the connectors that overlaps
// [from, to], cut short at until (the next scenario's cut: a partition
// that last advanced in this scenario's gap and stopped at the next cut is
// the next scenario's to judge), and whether there is one.
func (m *unreadMonitor) longest(from, to, until time.Time, conns []string) (stretch, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best stretch
	found := false
	for _, s := range m.stretches {
		if s.to.Before(from) || s.from.After(to) || !s.from.Before(until) || (conns != nil && !contains(conns, s.conn)) || m.unseen(s) {
			continue
		}
		if s.to.After(until) {
			s.to = until
		}
		if !found || s.length() > best.length() {
			best, found = s, true
		}
	}
	return best, found
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// window is when a scenario cut and healed.
type window struct {
	sc        scenario
	target    string
	cut, heal time.Time
	givenUp   map[string]int // "partition given up" lines while cut, of connectors no replica could serve
	ready     []string       // the cut replicas' readiness halfway through
}

const givenUpMsg = "partition given up; its lease is free for a replica that can serve it"

// stranded lists the connectors no replica can serve in sc.
func (h *harness) stranded(sc scenario) []string {
	var out []string
	for _, c := range connectors {
		if _, ok := h.bound(sc, c); !ok {
			out = append(out, c)
		}
	}
	return out
}

// partitions runs the scenarios one after the other, then checks the
// unread stretches the monitor saw against their bounds.
func (h *harness) partitions() {
	ctx, stop := context.WithCancel(h.ctx)
	mon := &unreadMonitor{h: h}
	monDone := make(chan struct{})
	go func() { defer close(monDone); mon.run(ctx) }()
	var wins []window
	for _, sc := range h.scenarios() {
		w := window{sc: sc, cut: time.Now(), givenUp: map[string]int{}}
		stranded := h.stranded(sc)
		for _, c := range stranded {
			w.givenUp[c] = -h.connCount([]string{c}, givenUpMsg)
		}
		var heal func()
		w.target, heal = sc.cut()
		// halfway through, what the cut replicas' readiness says
		ok := h.sleep(hold / 2)
		seen := map[*replica]bool{}
		for _, c := range sc.cuts {
			if c.dep != "process" && !seen[c.rep] {
				seen[c.rep] = true
				w.ready = append(w.ready, c.rep.name+" /readyz "+c.rep.readiness(h.ctx))
			}
		}
		ok = ok && h.sleep(hold-hold/2)
		heal()
		w.heal = time.Now()
		for _, c := range stranded {
			w.givenUp[c] += h.connCount([]string{c}, givenUpMsg)
		}
		wins = append(wins, w)
		if !ok || !h.sleep(gap) {
			break
		}
	}
	// the last heal's recovery is watched until the producer stops
	h.sleep(time.Until(h.t0.Add(h.k.duration + 10*time.Second + h.act2Length())))
	stop()
	<-monDone

	for i, w := range wins {
		end, until := w.heal.Add(gap), time.Now()
		if i < len(wins)-1 {
			until = wins[i+1].cut
		} else {
			end = until
		}
		var parts []string
		bad := false
		for _, c := range connectors {
			bound, served := h.bound(w.sc, c)
			if !served {
				parts = append(parts, fmt.Sprintf("%s: no replica reaches its sink, %d partitions given up while cut (want 0)", c, w.givenUp[c]))
				bad = bad || w.givenUp[c] > 0
				continue
			}
			s, found := mon.longest(w.cut, end, until, []string{c})
			judged := fmt.Sprintf("bound %s", bound)
			if w.sc.degraded {
				judged = fmt.Sprintf("slowed, not cut: only read again within %s of the heal", bound)
			}
			if !found {
				parts = append(parts, fmt.Sprintf("%s: none unread over 3s (%s)", c, judged))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s: longest unread %s, partition %s (%s)", c, s.length().Round(100*time.Millisecond), s.part, judged))
			bad = bad || (!w.sc.degraded && s.length() > bound)
		}
		parts = append(parts, w.ready...)
		h.record(w.cut, "partition: "+w.sc.name, w.target, w.heal.Sub(w.cut), bad, "%s", strings.Join(parts, "; "))
	}
	// Every stretch, inside a scenario's window or not, is held to the
	// loosest bound of the windows it overlaps (outside them, to the bound
	// with nothing cut); where no replica could serve its connector, it
	// must end within that bound after the heal.
	var over []string
	mon.mu.Lock()
	sort.Slice(mon.stretches, func(i, j int) bool { return mon.stretches[i].from.Before(mon.stretches[j].from) })
	unseen := 0
	for _, s := range mon.stretches {
		if mon.unseen(s) {
			unseen++
			continue
		}
		bound, _ := h.bound(scenario{}, s.conn)
		heal, stranded := time.Time{}, false
		for _, w := range wins {
			if s.from.After(w.heal.Add(gap)) || s.to.Before(w.cut) {
				continue
			}
			// A stretch that began after the heal of a scenario nobody
			// could serve (or a slowed one) is that scenario's only if it
			// ends in its gap; then it is held to the bounds it overlaps.
			if b, ok := h.bound(w.sc, s.conn); (!ok || w.sc.degraded) && s.from.Before(w.heal) {
				heal, stranded = w.heal, true
			} else if ok && b > bound {
				bound = b
			}
		}
		switch {
		case stranded && s.to.Sub(heal) > bound:
			over = append(over, fmt.Sprintf("%s partition %s read again only %s after the heal (bound %s)", s.conn, s.part, s.to.Sub(heal).Round(100*time.Millisecond), bound))
		case !stranded && s.length() > bound:
			over = append(over, fmt.Sprintf("%s partition %s unread %s from %s, its sink at seq %d, then %d (bound %s)", s.conn, s.part, s.length().Round(100*time.Millisecond), fmtAt(s.from.Sub(h.t0)), s.sinkFrom, s.sinkTo, bound))
		}
	}
	n := len(mon.stretches)
	var blind []string
	for _, b := range mon.blind {
		blind = append(blind, fmt.Sprintf("%s for %s (%v)", fmtAt(b.from.Sub(h.t0)), b.to.Sub(b.from).Round(100*time.Millisecond), b.err))
	}
	mon.mu.Unlock()
	if len(blind) > 0 {
		fmt.Printf("the partitions' monitor could not look %d times (%d stretches across them not judged): %s\n", len(blind), unseen, strings.Join(blind, "; "))
	}
	if len(over) > 0 {
		h.fail("partitions unread longer than their bound while a healthy replica existed: %s", strings.Join(over, "; "))
	}
	fmt.Printf("partitions act done at %s: %d scenarios, %d unread stretches over 3s, %d over their bound\n",
		fmtAt(time.Since(h.t0)), len(wins), n, len(over))
}
