// Package produce sends events to an event hub with the SDK's
// ProducerClient: lines of text ([Lines]) or generated demo orders ([Demo]).
// Both fill batches up to the hub's size limit and send a batch when the
// next event does not fit; with many partition keys, the fullest batch is
// sent early when all of them together would hold more than
// DefaultMaxPendingBytes, so memory does not grow with the number of events
// or keys. It is used by `ehsink send`, by the demo producer
// of the in-process emulator and by tests.
package produce
