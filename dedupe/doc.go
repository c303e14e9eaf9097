// Package dedupe drops what a sink already holds and collapses repeated keys
// inside a batch, so that replays after a crash or an ownership change write
// nothing twice.
//
// The watermark filter relies on one property of Event Hubs: the events of a
// partition arrive in sequence-number order, so the events a watermark covers
// are always a prefix of a batch.
package dedupe
