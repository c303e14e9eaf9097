package chaos_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// scheduleFaults starts every fault at its offset in the producer's run;
// they overlap on purpose. Each records its outcome. wg is done when the
// last has ended (and every service is back).
func (h *harness) scheduleFaults(wg *sync.WaitGroup) {
	d := h.k.duration
	var act1 sync.WaitGroup
	at := func(frac float64, name string, f func()) {
		act1.Add(1)
		go func() {
			defer act1.Done()
			if h.sleep(time.Until(h.t0.Add(time.Duration(frac * float64(d))))) {
				f()
			}
		}()
		_ = name
	}
	act1.Add(1)
	go func() { defer act1.Done(); h.killLoop(h.t0.Add(d - 5*time.Second)) }()

	at(0.10, "detach", h.detach)
	at(0.15, "claim", h.claimFault)
	at(0.22, "server-busy", func() { h.adminFault("server-busy", "/faults/server-busy?duration=5s", 5*time.Second) })
	at(0.28, "postgres", h.postgresCrash)
	at(0.36, "drop", func() { h.adminFault("drop-connections", "/faults/drop-connections", 0) })
	at(0.45, "sigterm", h.sigtermRestart)
	at(0.52, "azurite", h.azuriteKill)
	at(0.56, "latency", h.latency)
	at(0.70, "emulator", h.emulatorKill)
	at(0.80, "detach", h.detach)
	at(0.86, "drop", func() { h.adminFault("drop-connections", "/faults/drop-connections", 0) })

	// act 2, once act 1 is over and every service is back
	wg.Add(1)
	go func() {
		defer wg.Done()
		act1.Wait()
		if h.sleep(time.Until(h.t0.Add(d + 10*time.Second))) {
			h.partitions()
		}
	}()
}

// pickReplica locks and returns a random replica no other fault holds.
func (h *harness) pickReplica() *replica {
	start := h.intn(len(h.reps))
	for {
		for i := range h.reps {
			r := h.reps[(start+i)%len(h.reps)]
			if r.busy.TryLock() {
				return r
			}
		}
		if !h.sleep(100 * time.Millisecond) {
			return nil
		}
	}
}

// killLoop kills a random replica with SIGKILL every 20-40 s until end,
// restarting it 1-3 s later.
func (h *harness) killLoop(end time.Time) {
	for {
		next := time.Now().Add(h.between(20*time.Second, 40*time.Second))
		if next.After(end) || !h.sleep(time.Until(next)) {
			return
		}
		r := h.pickReplica()
		if r == nil {
			return
		}
		t0 := time.Now()
		name := r.current().name
		owned := h.ownedBy(h.ctx, name)
		r.kill9Locked()
		h.sleep(h.between(time.Second, 3*time.Second))
		err := r.startLocked()
		r.busy.Unlock()
		if err != nil {
			h.record(t0, "kill -9", name, time.Since(t0), true, "restart failed: %v", err)
			continue
		}
		h.record(t0, "kill -9", name, time.Since(t0), false, "held %s; restarted", owned)
	}
}

// sigtermRestart stops a replica gracefully: it must drain and exit 0.
func (h *harness) sigtermRestart() {
	r := h.pickReplica()
	if r == nil {
		return
	}
	defer r.busy.Unlock()
	t0 := time.Now()
	name := r.current().name
	owned := h.ownedBy(h.ctx, name)
	exit, took, timedOut := r.termLocked(drain + 15*time.Second)
	err := r.startLocked()
	if exit == -3 {
		h.record(t0, "SIGTERM restart", name, 0, false, "not applied: the process had exited on its own; restart: %v", errText(err))
		return
	}
	bad := exit != 0 || timedOut || err != nil
	h.record(t0, "SIGTERM restart", name, time.Since(t0), bad, "held %s; exit %d after %s (timed out: %v); restart: %v",
		owned, exit, took.Round(time.Millisecond), timedOut, errText(err))
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// postgresCrash stops PostgreSQL as a crash would for 10 s; 2 s in, a
// replica is killed and started again while its PostgreSQL sink is down:
// its Parquet connector must serve meanwhile, and it must not exit.
func (h *harness) postgresCrash() {
	t0 := time.Now()
	if err := h.pg.Crash(); err != nil {
		h.record(t0, "PostgreSQL stop -m immediate", "postgres", 0, true, "%v", err)
		return
	}
	// The replica stays locked until PostgreSQL is back, so that no other
	// fault stops it meanwhile and its state is its own.
	var wg sync.WaitGroup
	wg.Add(1)
	var startedName string
	r := (*replica)(nil)
	go func() {
		defer wg.Done()
		if !h.sleep(2 * time.Second) {
			return
		}
		if r = h.pickReplica(); r == nil {
			return
		}
		r.kill9Locked()
		if err := r.startLocked(); err != nil {
			h.record(time.Now(), "start with sink down", r.name, 0, true, "start: %v", err)
		}
		startedName = r.current().name
	}()
	h.sleep(10 * time.Second)
	wg.Wait()
	// Before PostgreSQL is back: what does the replica started meanwhile hold?
	var outcome string
	bad := false
	if r != nil {
		p := r.current()
		alive := p.name == startedName && p.running()
		outcome = fmt.Sprintf("%s started 2s into the outage: alive %v, holds %s", startedName, alive, h.ownedBy(h.ctx, startedName))
		bad = !alive
		r.busy.Unlock()
	}
	err := h.pg.Start()
	h.record(t0, "PostgreSQL stop -m immediate", "postgres", time.Since(t0), err != nil, "restart: %s", errText(err))
	if r != nil {
		h.record(t0.Add(2*time.Second), "start with sink down", startedName, 0, bad, "%s", outcome)
	}
}

// azuriteKill kills Azurite for 10 s (checkpoints and leases unreachable).
func (h *harness) azuriteKill() {
	t0 := time.Now()
	h.az.Stop()
	h.sleep(10 * time.Second)
	err := h.az.Start()
	h.record(t0, "Azurite kill -9", "azurite", time.Since(t0), err != nil, "restart on the same port and data: %s", errText(err))
}

// emulatorKill kills the emulator and starts it again on the same data
// dir; the hubs must keep every event they had acknowledged.
func (h *harness) emulatorKill() {
	t0 := time.Now()
	before, _ := h.hubsLast(h.ctx)
	p := h.emu.current()
	p.kill9()
	h.sleep(3 * time.Second)
	err := h.emu.start(h.ctx)
	if err != nil {
		h.record(t0, "emulator kill -9", p.name, time.Since(t0), true, "restart: %v", err)
		return
	}
	lasted := time.Since(t0)
	after, err := h.hubsLast(h.ctx)
	var shrunk []string
	for hub, parts := range before {
		for id, b := range parts {
			if a, ok := after[hub][id]; ok && a < b {
				shrunk = append(shrunk, fmt.Sprintf("%s partition %s last seq %d -> %d", hub, id, b, a))
			}
		}
	}
	h.record(t0, "emulator kill -9", p.name, lasted, len(shrunk) > 0 || err != nil, "restarted on its data dir; hubs %s",
		map[bool]string{true: "kept every event (last sequence numbers did not go back)", false: "went back: " + strings.Join(shrunk, ", ")}[len(shrunk) == 0 && err == nil])
}

func (h *harness) adminFault(name, path string, lasted time.Duration) {
	t0 := time.Now()
	out, err := h.emu.admin(h.ctx, path)
	if err == nil && lasted > 0 {
		h.sleep(lasted)
	}
	h.record(t0, "emulator "+name, "emulator", lasted, err != nil, "%s %s", out, errIf(err))
}

func errIf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (h *harness) detach() {
	p := h.parts[h.intn(len(h.parts))]
	h.adminFault("detach", "/faults/detach?hub="+hubName+"&partition="+p, 0)
}

// latency slows every send and RPC of the emulator by 200 ms for 8 s.
func (h *harness) latency() {
	t0 := time.Now()
	out, err := h.emu.admin(h.ctx, "/faults/latency?duration=200ms")
	h.sleep(8 * time.Second)
	_, err2 := h.emu.admin(context.WithoutCancel(h.ctx), "/faults/latency?duration=0s")
	h.record(t0, "emulator latency 200ms", "emulator", time.Since(t0), err != nil || err2 != nil, "%s %s %s", out, errIf(err), errIf(err2))
}

// claimFault makes the management calls of a claim fail: a replica is
// killed and restarted; the emulator fails the next partition-properties
// reads (the resume position's check), where it has that fault, and every
// connection is dropped as soon as the replica claims a partition.
func (h *harness) claimFault() {
	r := h.pickReplica()
	if r == nil {
		return
	}
	t0 := time.Now()
	before := h.countAll("cannot resume partition")
	r.kill9Locked()
	props, perr := h.emu.admin(h.ctx, "/faults/partition-properties?count=6")
	if perr != nil {
		props = "partition-properties fault not available (" + perr.Error() + ")"
	}
	err := r.startLocked()
	name := r.current().name
	r.busy.Unlock()
	if err != nil {
		h.record(t0, "failure during a claim", name, 0, true, "start: %v", err)
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for h.claims(name) == 0 && time.Now().Before(deadline) {
		if !h.sleep(10 * time.Millisecond) {
			return
		}
	}
	out, aerr := h.emu.admin(h.ctx, "/faults/drop-connections")
	dropAt, claimed := time.Since(t0), h.claims(name)
	h.sleep(5 * time.Second)
	h.record(t0, "failure during a claim", name, dropAt, aerr != nil,
		"%s; connections dropped %s after the restart, at its claim #%d (%s); 'cannot resume partition' logged %d times in the next 5s",
		props, dropAt.Round(time.Millisecond), claimed, out, h.countAll("cannot resume partition")-before)
}
