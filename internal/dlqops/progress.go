package dlqops

import (
	"fmt"
	"io"
	"strings"
)

// barWidth is the number of cells in the progress bar.
const barWidth = 20

// progress draws "\r[#####.....] 12/40" on a terminal, and keeps report
// lines from running into the bar. When off it only passes lines through.
type progress struct {
	w     io.Writer
	on    bool
	drawn int // length of the bar on screen, 0 when none
	done  uint64
	total uint64
	cells int
}

// update records progress and redraws when the bar would change.
func (p *progress) update(done, total uint64) {
	if !p.on {
		return
	}
	done = min(done, total)
	cells := 0
	if total > 0 {
		cells = int(done * barWidth / total)
	}
	changed := done != p.done || total != p.total
	p.done, p.total = done, total
	if changed && (cells != p.cells || done == total || done%50 == 0 || p.drawn == 0) {
		p.cells = cells
		p.draw()
	}
}

func (p *progress) draw() {
	s := fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", p.cells), strings.Repeat(".", barWidth-p.cells), p.done, p.total)
	fmt.Fprint(p.w, "\r"+s)
	p.drawn = len(s)
}

// line writes one report line above the bar.
func (p *progress) line(format string, args ...any) {
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
	if p.on && p.total > 0 {
		p.draw()
	}
}

// end leaves the bar on its own line.
func (p *progress) end() {
	if p.drawn > 0 {
		fmt.Fprintln(p.w)
		p.drawn = 0
	}
}

func (p *progress) clear() {
	if p.drawn > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.drawn)+"\r")
		p.drawn = 0
	}
}
