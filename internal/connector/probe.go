package connector

import (
	"context"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// probeIdle probes the sink of a connector that holds no partition while
// its circuit breaker is open. Such a connector makes no sink call, and
// its claims, the breaker's probes otherwise, are held for the open
// period, which doubles with each failed probe up to max_probe_interval:
// a replica whose sink came back would stay out of the load balancing for
// up to that long while the other replicas carry its share. Every
// interval (the load balancing's update interval: one claim round) it
// builds the sink anew and closes it, as one sink call (r.callSink: a
// slow sink that answers each round trip of a new session is given the
// time it takes, a silent one sink_timeout); a success closes the
// breaker, and the next round claims. It returns when ctx ends.
func probeIdle(ctx context.Context, every time.Duration, brk *breaker, r *Runner, build func(context.Context) (sinks.Sink, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if brk.isClosed() || len(r.snapshot()) > 0 {
			continue
		}
		err := r.callSink(ctx, callGuard{}, func(ctx context.Context) error {
			s, err := build(ctx)
			if err == nil {
				err = s.Close(ctx)
			}
			return err
		})
		if err == nil && ctx.Err() == nil {
			brk.log.Info("the sink answers a connection made while this replica holds no partition")
			brk.result(nil)
		}
	}
}
