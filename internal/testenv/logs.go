package testenv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// LogFilter is the connector filter the platform-log events of LogEvent
// are made for: events without records and test events are dropped.
const LogFilter = `{keep: exists($.records), drop: "@properties.test == true"}`

// LogEvent is event i of a partition in the shape of Azure platform logs,
// {"records": [{"v": 0}, {"v": 1}, ...]} with i%4 records, for the tests of
// filters and explode: LogFilter drops the events i%10 == 3 (no records)
// and i%10 == 7 (a test property); i%100 == 20 has a body that is not
// JSON, and element 1 of i%100 == 30 does not convert to a number.
func LogEvent(i int) *azeventhubs.EventData {
	ev := &azeventhubs.EventData{}
	switch {
	case i%10 == 3:
		ev.Body = []byte(`{"message":"ping"}`)
		return ev
	case i%100 == 20:
		ev.Body = []byte(`not json`)
		return ev
	case i%10 == 7:
		ev.Properties = map[string]any{"test": true}
	}
	var recs []string
	for k := range i % 4 {
		v := fmt.Sprint(k)
		if i%100 == 30 && k == 1 {
			v = `"x"`
		}
		recs = append(recs, fmt.Sprintf(`{"v":%s}`, v))
	}
	ev.Body = []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)
	return ev
}

// LogWant is what a clean run of events 0..n-1 of LogEvent in each of
// partitions makes with LogFilter and `explode: $.records`: the rows as
// "partition/seq/index" and the dead letters as "partition/seq", sorted,
// and the number of events the filter drops.
func LogWant(partitions []string, n int) (rows, dead []string, dropped int) {
	for _, p := range partitions {
		for i := range n {
			switch {
			case i%10 == 3 || i%10 == 7:
				dropped++
				continue
			case i%100 == 20:
				dead = append(dead, fmt.Sprintf("%s/%d", p, i))
				continue
			case i%100 == 30:
				dead = append(dead, fmt.Sprintf("%s/%d", p, i))
			}
			for k := range i % 4 {
				if i%100 != 30 || k != 1 {
					rows = append(rows, fmt.Sprintf("%s/%d/%d", p, i, k))
				}
			}
		}
	}
	slices.Sort(rows)
	slices.Sort(dead)
	return rows, dead, dropped
}
