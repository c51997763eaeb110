package termtext

import (
	"io"
	"strconv"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/stats"
)

// statsRow is one row of StatsTable.
func statsRow(name string, q admission.QueueStats) []string {
	row := []string{name, strconv.Itoa(q.Depth), stats.AgeText(q.OldestQueuedAge, q.Depth > 0), strconv.Itoa(q.Running), strconv.Itoa(q.Unknown), strconv.Itoa(q.Viewers)}
	for _, o := range admission.AllOutcomes {
		row = append(row, strconv.Itoa(q.Outcomes[o]))
	}
	for _, m := range admission.AllModes {
		row = append(row, strconv.Itoa(q.Modes[m]))
	}
	return row
}

// StatsTable writes the queues' figures as a table: one row a session,
// then their total.
func StatsTable(w io.Writer, s admission.Stats) error {
	rows := make([][]string, 0, len(s.Sessions)+1)
	for _, q := range s.Sessions {
		rows = append(rows, statsRow(q.Session, q))
	}
	rows = append(rows, statsRow("(total)", s.Total))
	return Table(w, []string{"SESSION", "DEPTH", "OLDEST", "RUNNING", "UNKNOWN", "VIEWERS", "COMPLETED", "FAILED", "INTERRUPTED", "CANCELLED", "TURNS", "NOTES"}, rows)
}

// ProducerTable writes the producers' figures as a table.
func ProducerTable(w io.Writer, ps []stats.Producer) error {
	rows := make([][]string, 0, len(ps))
	for _, s := range ps {
		rows = append(rows, []string{s.Producer, strconv.Itoa(s.Pending), strconv.Itoa(s.Waiting),
			stats.AgeText(s.OldestWaitingAge, s.Waiting > 0), strconv.Itoa(s.Rejected), strconv.Itoa(s.Delivered), strconv.Itoa(s.Dropped),
			Cell(OrDash(s.LastReason), 60)})
	}
	return Table(w, []string{"PRODUCER", "PENDING", "WAITING", "OLDEST WAITING", "REJECTED", "DELIVERED", "DROPPED", "LAST REFUSAL"}, rows)
}
