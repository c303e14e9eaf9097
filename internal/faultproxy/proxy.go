package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Fault is what the proxy does to the connections. The zero value
// forwards everything as it comes.
type Fault struct {
	// Blackhole stops forwarding, without closing anything.
	Blackhole bool
	// BlackholeOn, when not empty, blackholes every connection once a
	// client sends a chunk holding these bytes (that chunk is held too).
	BlackholeOn []byte
	// BlackholeOnReply is BlackholeOn for what the target sends: the
	// chunk holding these bytes, and everything after it, is held.
	BlackholeOnReply []byte
	// Reset closes every connection with a RST, and resets new ones.
	Reset bool
	// Latency delays each chunk, in each direction.
	Latency time.Duration
	// Bandwidth, if not zero, limits each direction of each connection to
	// that many bytes per second.
	Bandwidth int
}

// Proxy forwards connections from its listener to a target address,
// applying the current Fault. It is safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex // guards the fields below
	fault     Fault
	changed   chan struct{} // closed and replaced when fault changes
	conns     map[*link]struct{}
	triggered chan struct{} // closed when BlackholeOn matched
	closed    bool

	wg sync.WaitGroup // the accept loop and every pump
}

// link is one proxied connection: the client's and the target's side.
type link struct {
	client net.Conn

	mu     sync.Mutex // guards the fields below
	server net.Conn   // nil until dialed
	done   bool       // closed: a server dialed after is closed at once
}

// Start listens on a free loopback port and forwards to target. The
// accept loop runs until Close.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, changed: make(chan struct{}), conns: map[*link]struct{}{}, triggered: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set replaces the fault. A blackhole set by BlackholeOn stays until the
// next Set.
func (p *Proxy) Set(f Fault) {
	p.mu.Lock()
	p.fault = f
	if len(f.BlackholeOn) > 0 || len(f.BlackholeOnReply) > 0 {
		p.triggered = make(chan struct{})
	}
	close(p.changed)
	p.changed = make(chan struct{})
	var reset []*link
	if f.Reset {
		for l := range p.conns {
			reset = append(reset, l)
		}
	}
	p.mu.Unlock()
	for _, l := range reset {
		l.reset()
	}
}

// Heal forwards everything again (Set(Fault{})).
func (p *Proxy) Heal() { p.Set(Fault{}) }

// Triggered is closed when the BlackholeOn pattern of the current fault
// matched and the connections went into the blackhole.
func (p *Proxy) Triggered() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.triggered
}

// Close stops the listener, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.changed)
	p.changed = make(chan struct{})
	var all []*link
	for l := range p.conns {
		all = append(all, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range all {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		l := &link{client: c}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve dials the target for l once the fault lets traffic through, then
// pumps both directions until either side ends.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	if !p.pass(l, nil, true) {
		l.close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		l.reset()
		return
	}
	if !l.setServer(s) {
		return
	}
	var pumps sync.WaitGroup
	pumps.Go(func() { p.pump(l, l.client, s, true) })
	pumps.Go(func() { p.pump(l, s, l.client, false) })
	pumps.Wait()
	l.close()
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// pump copies src to dst, chunk by chunk, through the fault.
func (p *Proxy) pump(l *link, src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if !p.pass(l, chunk, fromClient) {
				return
			}
			f := p.current()
			if f.Latency > 0 {
				time.Sleep(f.Latency)
			}
			if werr := write(dst, chunk, f.Bandwidth); werr != nil {
				return
			}
		}
		if err != nil {
			// A close is traffic too: a blackhole holds it, so the other
			// side sees nothing (a server that ended an orphaned session
			// is not heard of by the client, nor the other way round).
			if !p.pass(l, nil, fromClient) {
				return
			}
			// pass the end on, so a close on one side closes the other
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite()
			} else {
				l.close()
			}
			return
		}
	}
}

// write writes chunk to dst; with a bandwidth (bytes per second), in
// slices of a twentieth of a second's worth, each after the time it takes
// at that rate, so that the receiver sees the data arrive at it.
func write(dst net.Conn, chunk []byte, bandwidth int) error {
	if bandwidth <= 0 {
		_, err := dst.Write(chunk)
		return err
	}
	step := max(1, bandwidth/20)
	for len(chunk) > 0 {
		n := min(step, len(chunk))
		time.Sleep(time.Duration(n) * time.Second / time.Duration(bandwidth))
		if _, err := dst.Write(chunk[:n]); err != nil {
			return err
		}
		chunk = chunk[n:]
	}
	return nil
}

func (p *Proxy) current() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// pass blocks while the fault holds traffic back: a blackhole, or a chunk
// that triggers BlackholeOn (from the client) or BlackholeOnReply (from
// the target). It returns false when the
// connection must end instead (a reset, or the proxy closing).
func (p *Proxy) pass(l *link, chunk []byte, fromClient bool) bool {
	for {
		p.mu.Lock()
		f, changed, closed := p.fault, p.changed, p.closed
		pattern := f.BlackholeOnReply
		if fromClient {
			pattern = f.BlackholeOn
		}
		if !closed && !f.Blackhole && len(pattern) > 0 && chunk != nil && bytes.Contains(chunk, pattern) {
			p.fault.Blackhole = true
			f.Blackhole = true
			close(p.triggered)
			close(p.changed)
			p.changed = make(chan struct{})
			changed = p.changed
		}
		p.mu.Unlock()
		switch {
		case closed:
			return false
		case f.Reset:
			l.reset()
			return false
		case !f.Blackhole:
			return true
		}
		<-changed
	}
}

// reset closes the client's side with a RST, and the target's side.
func (l *link) reset() {
	if tc, ok := l.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	l.close()
}

func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

// setServer records the target's side; false when l was closed meanwhile
// (s is then closed).
func (l *link) setServer(s net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		s.Close()
		return false
	}
	l.server = s
	return true
}
