package chaos_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// report prints the faults applied and the outcomes, as a table.
func (h *harness) report(prod *producer, aprod *avroProducer, caught time.Duration, res *results) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\nFAULTS (%s, %s)\n", h.k.mode, h.strategy)
	fmt.Fprintln(w, "at\tfault\ttarget\tlasted\tok\toutcome")
	sort.SliceStable(h.faults, func(i, j int) bool { return h.faults[i].at < h.faults[j].at })
	for _, f := range h.faults {
		lasted := "-"
		if f.lasted > 0 {
			lasted = f.lasted.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", fmtAt(f.at), f.fault, f.target, lasted, okMark(!f.bad), f.outcome)
	}
	w.Flush()

	fmt.Printf("\nHUB: %d events (%d valid, %d the mapping rejects, %d PostgreSQL rejects); %d sent twice by producer retries; %d acknowledged events missing; producer send failures retried: %d\n",
		res.hubEvents, res.hubKinds[valid], res.hubKinds[mapPoison], res.hubKinds[rowPoison], res.hubDupIDs, len(res.ackedLost), prod.sendErr)
	a := res.auto
	v2At := "never"
	if !a.v2At.IsZero() {
		v2At = fmtAt(a.v2At.Sub(h.t0))
	}
	fmt.Printf("AVRO HUB: %d events, %d written with v1 and %d with v2 (registered at %s, adds tag); %d acknowledged events missing; producer send failures retried: %d; %s's columns now: %s; rows whose n or tag is not their event's: %d\n",
		a.v1+a.v2, a.v1, a.v2, v2At, a.ackedLost, aprod.sendErr, connAuto, strings.Join(a.columns, ", "), len(a.wrongValue))
	if caught >= 0 {
		fmt.Printf("CATCH-UP: every partition of every connector at the hub's end (sink watermark and checkpoint) %s after the producer stopped; bound %s\n", caught.Round(100*time.Millisecond), h.k.catchUp)
	} else {
		fmt.Printf("CATCH-UP: NOT caught up within %s after the producer stopped (bound %s)\n", 2*h.k.catchUp, h.k.catchUp)
	}
	fmt.Printf("Parquet: %d hidden temporary files left in the output\n", res.tempFiles)
	st := res.iceberg
	fmt.Printf("Iceberg: %d snapshots, %d metadata files, %d data files in the warehouse (%d no snapshot references: commits that lost, orphans younger than orphan_age)\n\n",
		st.snapshots, st.metadataFiles, st.dataFiles, st.unreferenced)

	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "connector\texpected\tstored\tlost\tduplicated\tstale keys\tunexpected rows\tdead letters want/have\tDL missing\tDL twice\tDL not poison\tok")
	for _, c := range connectors {
		o := res.byConn[c]
		if o == nil {
			fmt.Fprintf(w, "%s\t?\t?\t?\t?\t?\t?\t?\t?\t?\t?\t%s\n", c, okMark(false))
			continue
		}
		stale := "-"
		if c == connUpsert {
			stale = fmt.Sprint(len(o.staleKeys))
		}
		ok := len(o.lost)+len(o.dup)+len(o.staleKeys)+len(o.unexpected)+len(o.dlMissing)+len(o.dlDup)+len(o.dlValid) == 0
		if c == connAuto {
			ok = ok && len(a.wrongValue) == 0 && a.v1 > 0 && a.v2 > 0
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d/%d\t%d\t%d\t%d\t%s\n", c, o.expected, o.present, len(o.lost), o.dupCount, stale,
			len(o.unexpected), o.dlWant, o.dlHave, len(o.dlMissing), len(o.dlDup), len(o.dlValid), okMark(ok))
	}
	w.Flush()
	for _, c := range []string{connAppend, connUpsert} {
		if o := res.byConn[c]; o != nil && o.sampleReason != "" {
			fmt.Printf("%s dead letter of a row PostgreSQL rejected: %q\n", c, o.sampleReason)
		}
	}

	if len(h.errorLines) > 0 {
		fmt.Println("\nREPLICA LOG LINES AT WARN AND ERROR (by connector and message)")
		keys := make([]string, 0, len(h.errorLines))
		for k := range h.errorLines {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Printf("  %6d  %s\n", h.errorLines[k], k)
		}
	}
	if len(h.violations) == 0 {
		fmt.Printf("\nRESULT (%s): PASS — 0 lost, 0 duplicated, 0 stale keys, dead letters exact, Avro rows through the schema change as sent\n", h.strategy)
		return
	}
	fmt.Printf("\nRESULT (%s): FAIL — %d violations:\n", h.strategy, len(h.violations))
	for _, v := range h.violations {
		fmt.Println("  - " + strings.ReplaceAll(v, "\n", " "))
	}
}

func okMark(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}
