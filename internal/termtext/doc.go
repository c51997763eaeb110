// Package termtext is how hermesq writes for an operator's terminal: stored
// text escaped so that it cannot drive the terminal (escape.go), aligned
// tables, cells cut to fit and one-line messages (table.go), and the
// tables of the queue and producer figures that both 'hermesq stats' and
// 'hermesq top' show (figures.go).
package termtext
