package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// replica is one `ehsink run` process slot: the harness kills and restarts
// it, and restarts it after an exit of its own (as a supervisor would),
// counting that exit as a violation.
type replica struct {
	h    *harness
	name string
	cfg  string // its connectors.yaml, through its fault proxies
	net  paths
	ops  atomic.Value // the current process's operations API, "http://host:port"
	// busy is held by whoever stops or starts the process (a fault, the
	// supervisor), so that two faults never act on one replica at once.
	busy sync.Mutex
	mu   sync.Mutex // guards cur and gen
	cur  *proc
	gen  int
}

var (
	ownerRE     = regexp.MustCompile(`\bowner=(\S+)`)
	connectorRE = regexp.MustCompile(`\bconnector=(\S+)`)
	msgRE       = regexp.MustCompile(`\bmsg=("(?:[^"\\]|\\.)*"|\S+)`)
	opsRE       = regexp.MustCompile(`msg="serving the operations API" addr=(\S+)`)
)

// startLocked starts a new generation; the caller holds busy.
func (r *replica) startLocked() error {
	r.mu.Lock()
	r.gen++
	gen := r.gen
	r.mu.Unlock()
	name := fmt.Sprintf("%s#%d", r.name, gen)
	p, stdout, err := startProc(name, r.h.runDir, filepath.Join(r.h.runDir, r.name+".log"),
		[]string{"run", "-c", r.cfg, "--log-level", "info"}, func(l string) {
			if m := opsRE.FindStringSubmatch(l); m != nil {
				r.ops.Store(m[1])
			}
			r.h.sawLine(name, l)
		})
	if err != nil {
		return err
	}
	go func() {
		for stdout.Scan() {
		}
	}()
	r.mu.Lock()
	r.cur = p
	r.mu.Unlock()
	go r.supervise(p)
	return nil
}

func (r *replica) start() error {
	r.busy.Lock()
	defer r.busy.Unlock()
	return r.startLocked()
}

func (r *replica) current() *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// supervise restarts the replica after an exit nobody asked for.
func (r *replica) supervise(p *proc) {
	<-p.done
	if p.wasExpected() || r.h.stopping.Load() {
		return
	}
	r.h.unexpectedExit(p)
	select {
	case <-time.After(time.Second):
	case <-r.h.ctx.Done():
		return
	}
	r.busy.Lock()
	defer r.busy.Unlock()
	if r.current() != p || r.h.stopping.Load() {
		return // someone else restarted it meanwhile
	}
	if err := r.startLocked(); err != nil {
		r.h.fail("restarting %s after its exit: %v", r.name, err)
	}
}

// readiness asks the replica's operations API whether it is ready: the
// status code and the first reason given.
func (r *replica) readiness(ctx context.Context) string {
	addr, _ := r.ops.Load().(string)
	if addr == "" {
		return "no operations API seen"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", addr+"/readyz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var ready struct {
		NotReady []struct {
			Connector, Reason string
		} `json:"not_ready"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&ready)
	if len(ready.NotReady) == 0 {
		return fmt.Sprint(resp.StatusCode)
	}
	why := ready.NotReady[0].Connector + ": " + ready.NotReady[0].Reason
	if len(why) > 90 {
		why = why[:90] + "…"
	}
	return fmt.Sprintf("%d (%s)", resp.StatusCode, why)
}

// kill9 kills the current process; the caller holds busy.
func (r *replica) kill9Locked() *proc {
	p := r.current()
	if p != nil && p.running() {
		p.kill9()
	}
	return p
}

// termLocked sends SIGTERM and waits for the exit; the caller holds busy.
func (r *replica) termLocked(bound time.Duration) (exit int, took time.Duration, timedOut bool) {
	p := r.current()
	if !p.running() {
		return -3, 0, false // it had exited on its own (reported as such)
	}
	t0 := time.Now()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.exitCode(), time.Since(t0), false
	case <-time.After(bound):
		p.kill9()
		return p.exitCode(), time.Since(t0), true
	}
}

// sawLine follows the replicas' logs: which owner ID is which process,
// errors by message.
func (h *harness) sawLine(proc, l string) {
	if m := ownerRE.FindStringSubmatch(l); m != nil {
		h.owners.Store(m[1], proc)
	}
	msg := "?"
	if m := msgRE.FindStringSubmatch(l); m != nil {
		msg = strings.Trim(m[1], `"`)
	}
	conn := ""
	if m := connectorRE.FindStringSubmatch(l); m != nil {
		conn = m[1]
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.msgs[proc] == nil {
		h.msgs[proc] = map[string]int{}
	}
	h.msgs[proc][msg]++
	if h.connMsgs[conn] == nil {
		h.connMsgs[conn] = map[string]int{}
	}
	h.connMsgs[conn][msg]++
	if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
		level := "WARN"
		if strings.Contains(l, "level=ERROR") {
			level = "ERROR"
		}
		if conn != "" {
			msg = conn + ": " + msg
		}
		h.errorLines[level+" "+msg]++
	}
}

// count is how often process proc logged msg.
func (h *harness) count(proc, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs[proc][msg]
}

// countAll is how often any process logged msg.
func (h *harness) countAll(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		n += m[msg]
	}
	return n
}

// connCount is how often the connectors logged msg, all processes together.
func (h *harness) connCount(conns []string, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range conns {
		n += h.connMsgs[c][msg]
	}
	return n
}

// claims is how many partitions process proc claimed.
func (h *harness) claims(proc string) int { return h.count(proc, "partition claimed") }

// ownerName names the process behind an owner ID.
func (h *harness) ownerName(id string) string {
	if v, ok := h.owners.Load(id); ok {
		return v.(string)
	}
	if id == "" {
		return "-"
	}
	return id
}
