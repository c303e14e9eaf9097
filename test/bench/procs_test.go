//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat.
const userHZ = 100

// readyTimeout bounds waiting for a child to start or stop; it is a
// readiness bound on a shared machine, not a measurement.
const readyTimeout = 2 * time.Minute

// child is a process the benchmark started and measures through /proc.
type child struct {
	cmd     *exec.Cmd
	start   time.Time
	stdout  *bufio.Reader
	stdin   io.WriteCloser
	stderr  *bytes.Buffer
	exited  chan struct{}
	waitErr error
}

// startChild starts name args with env added, stdout piped, stdin piped
// (closing it tells a drain child to exit) and stderr kept for failures.
//
// With PIN set, the child runs on CPU 0 (taskset execs it, so its PID is
// the child's): what is measured gets one core, and pinServers gives the
// emulator and PostgreSQL the other.
func startChild(b *testing.B, env []string, name string, args ...string) *child {
	b.Helper()
	if os.Getenv("PIN") != "" {
		name, args = "taskset", append([]string{"-c", "0", name}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	c := &child{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = c.stderr // read only after the exit
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	c.stdout = bufio.NewReader(out)
	c.start = time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	b.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = cmd.Process.Kill()
			<-c.exited
		}
		if b.Failed() {
			b.Logf("%s %s stderr:\n%s", filepath.Base(name), strings.Join(args, " "), c.stderr.String())
		}
	})
	return c
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// line reads the next stdout line of the child, or fails after readyTimeout.
func (c *child) line(b *testing.B) string {
	b.Helper()
	got := make(chan string, 1)
	go func() {
		l, _ := c.stdout.ReadString('\n')
		got <- strings.TrimSpace(l)
	}()
	select {
	case l := <-got:
		return l
	case <-time.After(readyTimeout):
		b.Fatalf("%s printed no line within %v", c.cmd.Path, readyTimeout)
		return ""
	}
}

// stop sends sig (unless nil) and waits for the exit; a non-zero exit
// fails b.
func (c *child) stop(b *testing.B, sig os.Signal) {
	b.Helper()
	if sig != nil {
		_ = c.cmd.Process.Signal(sig)
	}
	select {
	case <-c.exited:
	case <-time.After(readyTimeout):
		b.Fatalf("%s did not exit within %v of %v", c.cmd.Path, readyTimeout, sig)
	}
	if c.waitErr != nil {
		b.Fatalf("%s: %v\n%s", c.cmd.Path, c.waitErr, c.stderr.String())
	}
}

// usage is what /proc says of a live process.
type usage struct {
	cpu     time.Duration // user + system
	peakRSS int64         // bytes (VmHWM)
}

func procUsage(b *testing.B, pid int) usage {
	b.Helper()
	cpu, _, err := procCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	u := usage{cpu: cpu}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("/proc/%d/status: VmHWM: %v", pid, err)
			}
			u.peakRSS = kb << 10
		}
	}
	return u
}

// procCPU returns a process's own user+system CPU time and that of its
// children it has waited for, from /proc/<pid>/stat.
func procCPU(pid int) (own, children time.Duration, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is parenthesised and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, data)
	}
	f := strings.Fields(string(data[i+1:]))
	const utime = 14 - 3 // fields utime, stime, cutime, cstime follow
	if len(f) < utime+4 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	var t [4]int64
	for k := range t {
		if t[k], err = strconv.ParseInt(f[utime+k], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	tick := time.Second / userHZ
	return time.Duration(t[0]+t[1]) * tick, time.Duration(t[2]+t[3]) * tick, nil
}

// serverCPU returns the CPU time a PostgreSQL server has used: the
// postmaster's, that of its live children (backends, background workers)
// and that of the children that have exited; 0 without a postmaster.
func serverCPU(b *testing.B, postmaster int) time.Duration {
	b.Helper()
	if postmaster == 0 {
		return 0
	}
	own, gone, err := procCPU(postmaster)
	if err != nil {
		b.Fatal(err)
	}
	total := own + gone
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster || parentPID(pid) != postmaster {
			continue
		}
		if cpu, _, err := procCPU(pid); err == nil { // a backend may just have exited
			total += cpu
		}
	}
	return total
}

func parentPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// buildEhsink builds ./cmd/ehsink into a temporary directory.
func buildEhsink(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "ehsink")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/ehsink/ehsink/cmd/ehsink")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/ehsink: %v\n%s", err, out)
	}
	return bin
}

// pinServers moves the emulator (every thread of pid emu) and PostgreSQL
// (the postmaster pm and its processes; backends started later inherit it)
// to CPU 1, when PIN is set.
func pinServers(b *testing.B, emu, pm int) {
	b.Helper()
	if os.Getenv("PIN") == "" {
		return
	}
	if pm <= 0 {
		b.Fatal("PIN: PostgreSQL's postmaster was not found")
	}
	pids := []int{emu, pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && parentPID(pid) == pm {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", "1", strconv.Itoa(pid)).CombinedOutput(); err != nil {
			b.Fatalf("PIN: taskset on %d: %v\n%s", pid, err, out)
		}
	}
	b.Logf("PIN: what is measured runs on CPU 0; the emulator and PostgreSQL (%d processes) on CPU 1", len(pids)-1)
}

// startEmulator starts `ehsink emulator` with the given hubs and returns
// it and the connection string of each hub, in order.
func startEmulator(b *testing.B, bin string, hubs ...string) (*child, []string) {
	b.Helper()
	args := []string{"emulator", "--listen", "127.0.0.1:0", "--log-level", "warn"}
	for _, h := range hubs {
		args = append(args, "--hub", h+"="+strconv.Itoa(partitions))
	}
	emu := startChild(b, nil, bin, args...)
	conns := make([]string, len(hubs))
	for i, h := range hubs {
		conns[i] = emu.line(b)
		if !strings.HasPrefix(conns[i], "Endpoint=sb://") || !strings.Contains(conns[i], "EntityPath="+h) {
			b.Fatalf("emulator line %d is %q, want the connection string of hub %s", i+1, conns[i], h)
		}
	}
	return emu, conns
}

// Environment of a drain child (the test binary run again).
const (
	roleEnv   = "EHSINK_BENCH_ROLE"
	connEnv   = "EHSINK_BENCH_CONNECTION"
	countsEnv = "EHSINK_BENCH_COUNTS" // partition=events,partition=events
	batchEnv  = "EHSINK_BENCH_BATCH"
	connsEnv  = "EHSINK_BENCH_CONNECTIONS"
)

// startDrain runs the raw SDK drain as a child (this test binary again),
// with env added (a pipeline child's); it prints "done" after the last
// event and exits when its stdin closes.
func startDrain(b *testing.B, conn string, counts map[string]int64, batch, conns int, env ...string) *child {
	b.Helper()
	var spec []string
	for _, p := range slices.Sorted(maps.Keys(counts)) {
		spec = append(spec, p+"="+strconv.FormatInt(counts[p], 10))
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	env = append([]string{roleEnv + "=drain", connEnv + "=" + conn, countsEnv + "=" + strings.Join(spec, ","),
		batchEnv + "=" + strconv.Itoa(batch), connsEnv + "=" + strconv.Itoa(conns)}, env...)
	return startChild(b, env, self, "-test.run=^$")
}

// drainMain is the drain child: one ConsumerClient per connection asked
// for, one PartitionClient per partition (spread over the clients in turn)
// from earliest with a prefetch of batch, each goroutine calling
// ReceiveEvents for min(batch, what its partition still holds) until it
// has every event. A pipeline child also writes each batch
// (pipelineWriter).
func drainMain() int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "drain:", err); return 1 }
	batch, err := strconv.Atoi(os.Getenv(batchEnv))
	if err != nil {
		return fail(err)
	}
	conns, err := strconv.Atoi(os.Getenv(connsEnv))
	if err != nil || conns < 1 {
		return fail(fmt.Errorf("%s: %q", connsEnv, os.Getenv(connsEnv)))
	}
	pipeline := os.Getenv(pipelineEnv)
	if dir := os.Getenv("PPROF"); dir != "" {
		// the drain's (or pipeline's) CPU profile, to set beside ehsink's
		name := fmt.Sprintf("drain-%d.cpu", conns)
		if pipeline != "" {
			name = fmt.Sprintf("pipeline-%s-%d.cpu", pipeline, conns)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(err)
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(err)
		}
		defer f.Close()
	}
	clients := make([]*azeventhubs.ConsumerClient, conns)
	for i := range clients {
		cc, err := azeventhubs.NewConsumerClientFromConnectionString(os.Getenv(connEnv), "", azeventhubs.DefaultConsumerGroup, nil)
		if err != nil {
			return fail(err)
		}
		defer cc.Close(ctx)
		clients[i] = cc
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	report := func(err error) {
		mu.Lock()
		first = cmp.Or(first, err)
		mu.Unlock()
	}
	for i, spec := range strings.Split(os.Getenv(countsEnv), ",") {
		cc := clients[i%conns]
		id, n, _ := strings.Cut(spec, "=")
		want, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return fail(err)
		}
		pc, err := cc.NewPartitionClient(id, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: new(true)}, Prefetch: int32(batch)})
		if err != nil {
			return fail(err)
		}
		defer pc.Close(ctx)
		// A pipeline child hands each batch to its partition's writer
		// goroutine, so that receiving the next batch overlaps writing
		// this one (one batch waits at most, as in ehsink's runner).
		var batches chan []*azeventhubs.ReceivedEventData
		if pipeline != "" {
			w, err := newPipelineWriter(ctx, pipeline, os.Getenv(dsnEnv), id)
			if err != nil {
				return fail(err)
			}
			defer w.close(ctx)
			batches = make(chan []*azeventhubs.ReceivedEventData)
			wg.Go(func() {
				var werr error
				for evs := range batches {
					if werr == nil {
						werr = w.write(ctx, evs)
					}
				}
				if werr != nil {
					report(fmt.Errorf("partition %s: write: %w", id, werr))
				}
			})
		}
		wg.Go(func() {
			if batches != nil {
				defer close(batches)
			}
			var got int64
			for got < want {
				// A stall bound, not a measurement: the events are all there.
				rctx, cancel := context.WithTimeout(ctx, readyTimeout)
				evs, err := pc.ReceiveEvents(rctx, int(min(int64(batch), want-got)), nil)
				cancel()
				if err != nil {
					report(fmt.Errorf("partition %s after %d of %d events: %w", id, got, want, err))
					return
				}
				got += int64(len(evs))
				if batches != nil && len(evs) > 0 {
					batches <- evs
				}
			}
		})
	}
	wg.Wait()
	pprof.StopCPUProfile()
	if first != nil {
		return fail(first)
	}
	fmt.Println("done")
	_, _ = io.Copy(io.Discard, os.Stdin) // stay measurable until the parent has read /proc
	return 0
}
