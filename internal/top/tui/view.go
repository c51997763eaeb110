package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/stats"
)

// View draws the list of sessions and the producers, or the open
// session's queue.
func (m *model) View() string {
	var b strings.Builder
	t := m.figures.Total
	fmt.Fprintf(&b, "hermesq top — %d sessions, depth %d, running %d, unknown %d, viewers %d   %s\n",
		len(m.figures.Sessions), t.Depth, t.Running, t.Unknown, t.Viewers, m.figures.At.Format("15:04:05"))
	if m.open != "" {
		fmt.Fprintf(&b, "queue of %s (esc: back, q: quit)\n\n", m.open)
		rows := [][]string{}
		for _, a := range m.queue {
			age := "-"
			switch a.Status {
			case backend.StatusQueued:
				age = stats.AgeText(m.figures.At.Sub(a.AdmittedAt), true)
			case backend.StatusRunning, backend.StatusUnknown:
				age = stats.AgeText(m.figures.At.Sub(a.StartedAt), true)
			}
			rows = append(rows, []string{strconv.FormatUint(a.Seq, 10), a.ID, string(a.Kind), string(a.Status), age, termtext.Cell(a.Text(), 40)})
		}
		if len(rows) == 0 {
			b.WriteString("(nothing queued, running or unknown)\n")
		} else {
			_ = termtext.Table(&b, []string{"SEQ", "ID", "KIND", "STATUS", "AGE", "TEXT"}, rows)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "sort: %s   keys: ↑/↓ select  enter queue  s sort  r refresh  q quit\n\n", m.sort)
	rows := [][]string{}
	for i, q := range m.figures.Sessions {
		mark := " "
		if i == m.cursor {
			mark = ">"
		}
		running := "-"
		if q.RunningID != "" {
			running = q.RunningID[:min(8, len(q.RunningID))] + " " + stats.AgeText(q.RunningAge, true)
		}
		rows = append(rows, []string{mark, q.Session, q.State, strconv.Itoa(q.Depth), stats.AgeText(q.OldestQueuedAge, q.Depth > 0),
			running, strconv.Itoa(q.Unknown), termtext.OrDash(q.LeaseHolder), strconv.Itoa(q.Viewers)})
	}
	_ = termtext.Table(&b, []string{" ", "SESSION", "STATE", "DEPTH", "OLDEST", "RUNNING", "UNKNOWN", "LEASE", "VIEWERS"}, rows)
	switch {
	case m.prodEr != nil:
		fmt.Fprintf(&b, "\nproducers: %s\n", termtext.OneLine(m.prodEr.Error()))
	case len(m.prods) > 0:
		b.WriteString("\n")
		_ = termtext.ProducerTable(&b, m.prods)
	}
	return b.String()
}
