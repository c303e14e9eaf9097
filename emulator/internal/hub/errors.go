package hub

import (
	"errors"
	"fmt"
	"strings"
)

// AMQP error conditions the hub returns in [Error.Condition]. The protocol
// layer copies them verbatim into attach, detach and disposition errors.
const (
	// CondNotFound is returned for an unknown hub or an undeclared consumer group.
	CondNotFound = "amqp:not-found"
	// CondArgumentOutOfRange is returned for an unknown partition and an
	// unparsable start position (selector filter).
	CondArgumentOutOfRange = "com.microsoft:argument-out-of-range"
	// CondStolen is returned when a receiver loses ownership to, or is refused
	// because of, a receiver with an equal or higher epoch.
	CondStolen = "amqp:link:stolen"
	// CondResourceLimitExceeded is returned for a sixth non-epoch receiver on
	// one (partition, consumer group).
	CondResourceLimitExceeded = "amqp:resource-limit-exceeded"
	// CondServerBusy is returned by Append while [Namespace.SetServerBusy] is in effect.
	CondServerBusy = "com.microsoft:server-busy"
	// CondDetachForced is passed to OnDetach by [Namespace.ForceDetach].
	CondDetachForced = "amqp:link:detach-forced"
	// CondInvalidField is returned for a partition key that is too long to store.
	CondInvalidField = "amqp:invalid-field"
	// CondMessageSizeExceeded is returned for a message too large to store.
	CondMessageSizeExceeded = "amqp:link:message-size-exceeded"
)

// MaxNonEpochReceivers is how many receivers without an epoch may read one
// partition in one consumer group at the same time, as on the real service.
const MaxNonEpochReceivers = 5

// ErrClosed is returned by Append, OpenReceiver and Next after the namespace
// was closed, and by Next after [Receiver.Close]. It is not an AMQP condition:
// the protocol layer is shutting the link or connection down anyway.
var ErrClosed = errors.New("hub: closed")

// Error is an error with an AMQP condition, meant to be sent to the client as
// is (attach refusal, detach, rejected disposition). Condition is the API;
// Description mirrors the text of the real service and is for humans.
type Error struct {
	// Condition is an AMQP error condition symbol, one of the Cond constants.
	Condition string
	// Description is the human-readable text sent with the condition.
	Description string
}

// Error implements error.
func (e *Error) Error() string { return e.Condition + ": " + e.Description }

// ConditionOf returns the condition of the first *Error in err's chain, or ""
// when there is none.
func ConditionOf(err error) string {
	var he *Error
	if errors.As(err, &he) {
		return he.Condition
	}
	return ""
}

// nameOrNil renders a receiver name in ownership errors as the real service
// does: 'nil' when the client gave none.
func nameOrNil(s string) string {
	if s == "" {
		return "nil"
	}
	return s
}

func errHubNotFound(name string) *Error {
	return &Error{Condition: CondNotFound, Description: fmt.Sprintf(
		"The messaging entity '%s' could not be found. To know more visit https://aka.ms/sbResourceMgrExceptions.", name)}
}

func errConsumerGroupNotFound(hub, cg string) *Error {
	return &Error{Condition: CondNotFound, Description: fmt.Sprintf(
		"The messaging entity '%s/ConsumerGroups/%s' could not be found. To know more visit https://aka.ms/sbResourceMgrExceptions.", hub, cg)}
}

func errPartitionOutOfRange(id string, n int) *Error {
	return &Error{Condition: CondArgumentOutOfRange, Description: fmt.Sprintf(
		"The specified partition '%s' is invalid for an EventHub partition sender or receiver. It should be between 0 and %d.", id, n-1)}
}

func errBadSelector(expr, why string) *Error {
	return &Error{Condition: CondArgumentOutOfRange, Description: fmt.Sprintf(
		"The supplied filter expression '%s' is invalid: %s.", expr, why)}
}

// errStolenByEpoch is sent to a holder that a new receiver with an equal or
// higher epoch replaces (reference §6.2).
func errStolenByEpoch(newName string, newEpoch int64, oldName string, oldEpoch *int64) *Error {
	old := "''"
	if oldEpoch != nil {
		old = fmt.Sprintf("'%d'", *oldEpoch)
	}
	return &Error{Condition: CondStolen, Description: fmt.Sprintf(
		"New receiver '%s' with higher epoch of '%d' is created hence current receiver '%s' with epoch %s is getting disconnected. If you are recreating the receiver, make sure a higher epoch is used.",
		nameOrNil(newName), newEpoch, nameOrNil(oldName), old)}
}

// errLowerEpoch refuses a receiver whose epoch is lower than the holder's.
func errLowerEpoch(existing string, existingEpoch int64, newName string, newEpoch int64) *Error {
	return &Error{Condition: CondStolen, Description: fmt.Sprintf(
		"Receiver '%s' with a higher epoch '%d' already exists. Receiver '%s' with epoch %d cannot be created. Make sure you are creating receiver with increasing epoch value to ensure connectivity, or ensure all old epoch receivers are closed or disconnected",
		nameOrNil(existing), existingEpoch, nameOrNil(newName), newEpoch)}
}

// errNonEpochRefused refuses a receiver without epoch while an epoch receiver holds.
func errNonEpochRefused(epoch int64) *Error {
	return &Error{Condition: CondStolen, Description: fmt.Sprintf(
		"At least one receiver for the endpoint is created with epoch of '%d', and so non-epoch receiver is not allowed. Either reconnect with a higher epoch, or make sure all epoch receivers are closed or disconnected.",
		epoch)}
}

func errTooManyReceivers(names []string) *Error {
	return &Error{Condition: CondResourceLimitExceeded, Description: fmt.Sprintf(
		"Exceeded the maximum number of allowed receivers per partition in a consumer group which is %d. List of connected receivers - %s.",
		MaxNonEpochReceivers, strings.Join(names, ", "))}

}

func errServerBusy(wait int64) *Error {
	return &Error{Condition: CondServerBusy, Description: fmt.Sprintf(
		"The request was terminated because the entity is being throttled by the emulator. Please wait %d seconds and try again.", wait)}
}

func errForcedDetach(hub, partition string) *Error {
	return &Error{Condition: CondDetachForced, Description: fmt.Sprintf(
		"The link to '%s/Partitions/%s' was force detached by the emulator.", hub, partition)}
}
