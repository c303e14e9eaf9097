package source

import (
	"net"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// InjectListCheckpointsErrors makes the next n checkpoint listings of the
// processor fail (before the store is asked), and, with reachSDK, lets the
// processor see that error as it did before the store shielded it.
func InjectListCheckpointsErrors(s *Source, n int, reachSDK bool) {
	s.passListErrs.Store(reachSDK)
	s.injectListErrs.Store(int64(n))
}

// WithoutClientRetries returns o with the SDK's retries of the long-lived
// client turned off.
func WithoutClientRetries(o Options) Options {
	o.clientRetry = azeventhubs.RetryOptions{MaxRetries: -1}
	return o
}

// WithClaimPrefetch returns o with the processor's claim links given the
// configured prefetch even when reader connections receive the
// partitions, as before Source.claimPrefetch.
func WithClaimPrefetch(o Options) Options {
	o.claimPrefetch = true
	return o
}

// ReaderLoad returns how many partitions receive on each reader connection
// (nil when the source reads on the processor's connection only).
func ReaderLoad(s *Source) []int {
	if s.readers == nil {
		return nil
	}
	s.readers.mu.Lock()
	defer s.readers.mu.Unlock()
	return append([]int(nil), s.readers.load...)
}

// The heal reasons and the connection bound, for the external tests.
const (
	HealUnread     = healUnread
	HealSilent     = healSilent
	MaxConnections = maxConnections
)

// WithDialed returns o with f called on every AMQP connection the source's
// clients dial, right after the dial.
func WithDialed(o Options, f func(net.Conn)) Options {
	o.dialed = f
	return o
}
