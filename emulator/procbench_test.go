//go:build linux

package emulator

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/testenv"
)

const (
	// procBenchPartitions is the partition count of the benchmark hub.
	procBenchPartitions = 4
	// procBenchEventSize is the body size of the drained events.
	procBenchEventSize = 200
	// procBenchReceiveCount and procBenchReceiveWait are one ReceiveEvents
	// call's count and timeout: the defaults of ehsink's source
	// (MaxEvents, MaxWait).
	procBenchReceiveCount = 500
	procBenchReceiveWait  = time.Second
	// procBenchStallLimit is how many consecutive empty ReceiveEvents calls
	// on one partition fail the drain: all events are stored before it
	// starts, so an empty call means the emulator stalled.
	procBenchStallLimit = 30
	// userHZ is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
	// 100 on every Linux architecture Go supports).
	userHZ = 100
)

// BenchmarkOutOfProcess measures the emulator as its own process, the way
// `ehsink run` or a user's consumer meets it. It builds ./cmd/ehsink once,
// then in each iteration starts `ehsink emulator --listen 127.0.0.1:0 --hub
// bench=4` as a child process (ready once it printed its connection string
// on the first stdout line) and, through the real SDK over loopback TCP:
//
//  1. sends N events of 200 bytes, N/4 to each partition from one goroutine
//     per partition on one ProducerClient, in batches filled to the size
//     limit (send200-ev/s);
//  2. reads the child's VmRSS (/proc/<pid>/status) and divides it by N
//     (rss-B/event, to compare with event-B, the body size; rss-delta-B/event
//     leaves out the RSS of the idle emulator measured before the send);
//  3. drains all partitions from earliest with one PartitionClient per
//     partition on one ConsumerClient (one AMQP connection, as ehsink's
//     Processor uses; default prefetch), calling
//     ReceiveEvents(500) with a 1 s timeout in a loop, as ehsink's source
//     does, until each partition gave its N/4 events (drain-ev/s). Over
//     exactly this window it measures the emulator's CPU time (utime+stime
//     from /proc/<pid>/stat, emu-cpu-s) and this process's (getrusage
//     RUSAGE_SELF, client-cpu-s: this process is the SDK consumer; the
//     producer is closed and its garbage collected before the window), and
//     their ratio emu/client-cpu (the goal is below 1);
//  4. sends N1K events of 1 KiB the same way (send1k-ev/s);
//  5. stops the child with SIGTERM and expects exit status 0.
//
// N is EHSINK_BENCH_EVENTS (default 1,000,000, rounded up to a multiple of
// 4) and N1K is EHSINK_BENCH_EVENTS_1K (default N/4, which keeps the
// child's memory near 256 MiB of 1 KiB bodies). Two knobs are for
// diagnosis, not for the reported figures: EHSINK_BENCH_CONSUMERS (1 to 4,
// default 1) spreads the partitions over that many ConsumerClients (that
// is, connections), and EHSINK_BENCH_PREFETCH sets the PartitionClients'
// Prefetch (default 0: the SDK's 300).
//
// Each b.N iteration is a full, independent measurement with a fresh
// child; the reported metrics are means over the iterations. One iteration
// takes long enough that the default -benchtime runs one; pass
// -benchtime=1x to make that explicit:
//
//	go test -run '^$' -bench BenchmarkOutOfProcess -benchtime=1x -timeout 30m ./emulator/
//
// Skipped with -short. Linux only (/proc).
func BenchmarkOutOfProcess(b *testing.B) {
	if testing.Short() {
		b.Skip("out-of-process benchmark builds ehsink and moves 1,000,000 events; skipped with -short")
	}
	n := envCount(b, "EHSINK_BENCH_EVENTS", 1_000_000)
	if n == 0 {
		b.Fatal("EHSINK_BENCH_EVENTS=0: nothing to measure")
	}
	n = (n + procBenchPartitions - 1) / procBenchPartitions * procBenchPartitions
	n1k := envCount(b, "EHSINK_BENCH_EVENTS_1K", n/4)
	n1k = (n1k + procBenchPartitions - 1) / procBenchPartitions * procBenchPartitions
	consumers := envCount(b, "EHSINK_BENCH_CONSUMERS", 1)
	if consumers < 1 || consumers > procBenchPartitions {
		b.Fatalf("EHSINK_BENCH_CONSUMERS=%d: want 1 to %d", consumers, procBenchPartitions)
	}
	prefetch := envCount(b, "EHSINK_BENCH_PREFETCH", 0)
	bin, _, err := testenv.BuildEhsink(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}

	var sum procBenchResult
	iters := 0
	for b.Loop() {
		r := runProcBench(b, bin, n, n1k, consumers, int32(prefetch))
		b.Logf("N=%d N1K=%d: send200 %.0f ev/s, send1k %.0f ev/s, drain %.0f ev/s in %v, emulator CPU %.2fs, client CPU %.2fs, RSS %d B (idle %d B)",
			n, n1k, r.send200, r.send1k, r.drain, r.drainWall.Round(time.Millisecond), r.emuCPU.Seconds(), r.clientCPU.Seconds(), r.rss, r.rssIdle)
		sum.add(r)
		iters++
	}
	f := float64(iters)
	b.ReportMetric(sum.send200/f, "send200-ev/s")
	b.ReportMetric(sum.send1k/f, "send1k-ev/s")
	b.ReportMetric(sum.drain/f, "drain-ev/s")
	b.ReportMetric(sum.emuCPU.Seconds()/f, "emu-cpu-s")
	b.ReportMetric(sum.clientCPU.Seconds()/f, "client-cpu-s")
	b.ReportMetric(sum.emuCPU.Seconds()/sum.clientCPU.Seconds(), "emu/client-cpu")
	b.ReportMetric(float64(sum.rss)/f/float64(n), "rss-B/event")
	b.ReportMetric(float64(sum.rss-sum.rssIdle)/f/float64(n), "rss-delta-B/event")
	b.ReportMetric(procBenchEventSize, "event-B")
}

// procBenchResult is one iteration's measurement.
type procBenchResult struct {
	send200, send1k, drain float64 // events/s
	drainWall              time.Duration
	emuCPU, clientCPU      time.Duration // during the drain
	rssIdle, rss           int64         // emulator VmRSS before and after the 200-byte send
}

func (r *procBenchResult) add(o procBenchResult) {
	r.send200 += o.send200
	r.send1k += o.send1k
	r.drain += o.drain
	r.drainWall += o.drainWall
	r.emuCPU += o.emuCPU
	r.clientCPU += o.clientCPU
	r.rssIdle += o.rssIdle
	r.rss += o.rss
}

// runProcBench is one full measurement against a fresh emulator process.
func runProcBench(b *testing.B, bin string, n, n1k, consumers int, prefetch int32) procBenchResult {
	b.Helper()
	ctx := context.Background()
	emu := startEmulatorProcess(b, bin)
	var r procBenchResult
	var err error
	if r.rssIdle, err = procRSS(emu.pid()); err != nil {
		b.Fatal(err)
	}

	elapsed := sendProcBench(b, emu.connStr, n, procBenchEventSize)
	r.send200 = float64(n) / elapsed.Seconds()
	if r.rss, err = procRSS(emu.pid()); err != nil {
		b.Fatal(err)
	}

	// Collect the producer's garbage now so the client CPU of the drain
	// is the consumer's alone.
	runtime.GC()
	clients := make([]*azeventhubs.ConsumerClient, consumers)
	for i := range clients {
		c, err := azeventhubs.NewConsumerClientFromConnectionString(emu.connStr, "", azeventhubs.DefaultConsumerGroup, nil)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = c
	}
	emu0, err := procCPU(emu.pid())
	if err != nil {
		b.Fatal(err)
	}
	self0 := selfCPU(b)
	start := time.Now()
	drainProcBench(b, clients, prefetch, n/procBenchPartitions)
	r.drainWall = time.Since(start)
	self1 := selfCPU(b)
	emu1, err := procCPU(emu.pid())
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range clients {
		if err := c.Close(ctx); err != nil {
			b.Errorf("ConsumerClient.Close: %v", err)
		}
	}
	r.drain = float64(n) / r.drainWall.Seconds()
	r.emuCPU, r.clientCPU = emu1-emu0, self1-self0

	if n1k > 0 {
		elapsed = sendProcBench(b, emu.connStr, n1k, 1024)
		r.send1k = float64(n1k) / elapsed.Seconds()
	}
	emu.stop(b)
	return r
}

// sendProcBench sends n events of size bytes, n/4 to each partition from
// one goroutine per partition, in batches filled to the size limit, and
// returns the wall time of the sends (client creation excluded).
func sendProcBench(b *testing.B, connStr string, n, size int) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := azeventhubs.NewProducerClientFromConnectionString(connStr, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	// Open the connection and CBS outside the timed part.
	if _, err := p.GetEventHubProperties(ctx, nil); err != nil {
		b.Fatalf("GetEventHubProperties: %v", err)
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	per := n / procBenchPartitions
	errs := make(chan error, procBenchPartitions)
	start := time.Now()
	var wg sync.WaitGroup
	for part := range procBenchPartitions {
		wg.Go(func() {
			if err := sendPartition(ctx, p, strconv.Itoa(part), per, body); err != nil {
				errs <- fmt.Errorf("partition %d: %w", part, err)
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Error(err)
	}
	if b.Failed() {
		b.FailNow()
	}
	return elapsed
}

func sendPartition(ctx context.Context, p *azeventhubs.ProducerClient, partition string, n int, body []byte) error {
	for sent := 0; sent < n; {
		batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &partition})
		if err != nil {
			return fmt.Errorf("NewEventDataBatch: %w", err)
		}
		for sent < n {
			err := batch.AddEventData(&azeventhubs.EventData{Body: body}, nil)
			if errors.Is(err, azeventhubs.ErrEventDataTooLarge) && batch.NumEvents() > 0 {
				break // batch full
			}
			if err != nil {
				return fmt.Errorf("AddEventData: %w", err)
			}
			sent++
		}
		if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
			return fmt.Errorf("SendEventDataBatch after %d events: %w", sent, err)
		}
	}
	return nil
}

// drainProcBench reads per events from earliest from every partition with
// one PartitionClient each, and checks their sequence numbers.
func drainProcBench(b *testing.B, clients []*azeventhubs.ConsumerClient, prefetch int32, per int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	errs := make(chan error, procBenchPartitions)
	var wg sync.WaitGroup
	for part := range procBenchPartitions {
		wg.Go(func() {
			c := clients[part%len(clients)]
			if err := drainPartition(ctx, c, strconv.Itoa(part), prefetch, per); err != nil {
				errs <- fmt.Errorf("partition %d: %w", part, err)
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Error(err)
	}
	if b.Failed() {
		b.FailNow()
	}
}

func drainPartition(ctx context.Context, c *azeventhubs.ConsumerClient, partition string, prefetch int32, n int) error {
	pc, err := c.NewPartitionClient(partition, &azeventhubs.PartitionClientOptions{
		StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)},
		Prefetch:      prefetch,
	})
	if err != nil {
		return fmt.Errorf("NewPartitionClient: %w", err)
	}
	defer pc.Close(context.Background())
	next := int64(0)
	for empty := 0; next < int64(n); {
		rctx, cancel := context.WithTimeout(ctx, procBenchReceiveWait)
		evs, err := pc.ReceiveEvents(rctx, min(procBenchReceiveCount, n-int(next)), nil)
		cancel()
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("after %d of %d events: %w", next, n, ctx.Err())
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("ReceiveEvents after %d of %d events: %w", next, n, err)
		case len(evs) == 0:
			if empty++; empty == procBenchStallLimit {
				return fmt.Errorf("no event for %d calls after %d of %d events", empty, next, n)
			}
			continue
		}
		empty = 0
		for _, ev := range evs {
			if ev.SequenceNumber != next || len(ev.Body) != procBenchEventSize {
				return fmt.Errorf("got sequence number %d with %d bytes, want %d with %d", ev.SequenceNumber, len(ev.Body), next, procBenchEventSize)
			}
			next++
		}
	}
	return nil
}

// emulatorProcess is a running `ehsink emulator` child.
type emulatorProcess struct {
	cmd     *exec.Cmd
	connStr string
	exited  chan struct{} // closed when Wait returned
	waitErr error         // set before exited is closed
}

func (e *emulatorProcess) pid() int { return e.cmd.Process.Pid }

// startEmulatorProcess starts `ehsink emulator` on a free loopback port and
// returns once it printed its connection string. Cleanup kills it if stop
// was not called.
func startEmulatorProcess(b *testing.B, bin string) *emulatorProcess {
	b.Helper()
	cmd := exec.Command(bin, "emulator", "--listen", "127.0.0.1:0", "--hub", "bench=4", "--log-level", "warn")
	// The child's log goes to a buffer, shown only if the benchmark
	// fails, so it cannot break the benchmark's output lines.
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s emulator: %v", bin, err)
	}
	e := &emulatorProcess{cmd: cmd, exited: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		// Ends with the first line or when the child's stdout closes.
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	b.Cleanup(func() {
		select {
		case <-e.exited:
		default:
			cmd.Process.Kill()
			<-e.exited
		}
		if b.Failed() && stderr.Len() > 0 { // Wait has returned: stderr is complete
			b.Logf("emulator stderr:\n%s", stderr.Bytes())
		}
	})
	var line string
	select {
	case line = <-lines:
	case <-time.After(testTimeout):
		b.Fatalf("emulator printed no connection string within %v", testTimeout)
	}
	line = strings.TrimSpace(line)
	addr, ok := strings.CutPrefix(line, "Endpoint=sb://")
	addr, _, _ = strings.Cut(addr, ";")
	if !ok || strings.HasSuffix(addr, ":0") || !strings.Contains(line, "EntityPath=bench") {
		b.Fatalf("emulator's first line is %q, want a connection string with its listen port and EntityPath=bench", line)
	}
	e.connStr = line
	return e
}

// stop sends SIGTERM and waits for a clean exit.
func (e *emulatorProcess) stop(b *testing.B) {
	b.Helper()
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatalf("SIGTERM emulator: %v", err)
	}
	select {
	case <-e.exited:
	case <-time.After(testTimeout):
		b.Fatalf("emulator did not exit within %v of SIGTERM", testTimeout)
	}
	if e.waitErr != nil {
		b.Fatalf("emulator after SIGTERM: %v", e.waitErr)
	}
}

// procCPU returns the user+system CPU time of process pid, all threads.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesised and may hold spaces;
	// fields from 3 (state) on follow the last ')'.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, data)
	}
	f := strings.Fields(string(data[i+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	var ticks int64
	for _, s := range f[utime : stime+1] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// procRSS returns the resident set size (VmRSS) of process pid in bytes.
func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// selfCPU returns this process's user+system CPU time.
func selfCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// envCount reads a positive event count from the environment.
func envCount(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
	if err != nil || v < 0 {
		b.Fatalf("%s=%q: want a count of events", name, s)
	}
	return v
}
