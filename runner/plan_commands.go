package runner

import (
	"bufio"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	dsets "github.com/xrun-dev/xrun/datasets"
	"github.com/xrun-dev/xrun/engine"
	"github.com/xrun-dev/xrun/engine/driver"
	"github.com/xrun-dev/xrun/results/layout"
)

// CommandsOptions say where a run would keep things, so that the commands
// a plan prints are those its workers will run.
type CommandsOptions struct {
	// CacheDir is the dataset cache (DatasetCacheDir); Out the results
	// directory ("" means the spec's).
	CacheDir, Out string
}

// CellCommands lists the commands a cell's worker will run: nil for the
// built-in engine, which runs in the worker itself.
func (p *Plan) CellCommands(c *Cell, o CommandsOptions) ([]driver.Command, error) {
	if builtinEngine(c.Params.Engine) {
		return nil, nil
	}
	pl, err := plannerFor(p.Spec, c.Params.Engine)
	if err != nil {
		return nil, err
	}
	out := o.Out
	if out == "" {
		out = p.Spec.Out
	}
	dir := layout.CellDir(out, c.ID)
	if a, err := filepath.Abs(dir); err == nil {
		dir = a
	}
	cache := o.CacheDir
	if a, err := filepath.Abs(cache); err == nil {
		cache = a
	}
	dc := &driver.Cell{ID: c.ID, Dir: dir, Params: cellDriverParams(p.Spec, c), Engine: engineConfig(c, c.Params.Engine),
		Model: *c.Model, ModelName: engine.HFName(c.Params.Model), CacheDir: cache, GPUs: c.Params.GPUsPerCell}
	wd := workerDatasetFor(c)
	dc.Dataset = wd.File
	if wd.Generate != nil {
		dc.Dataset = dsets.Cache{Dir: cache}.FilePath(*wd.Generate)
	}
	return pl.Commands(dc)
}

// WriteCommands writes, cell by cell, the commands a run of the plan
// would run, as shell lines a user can paste; cells of the built-in
// engine say that they run in xrun's worker.
func (p *Plan) WriteCommands(w io.Writer, o CommandsOptions) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := range p.Cells {
		c := &p.Cells[i]
		cmds, err := p.CellCommands(c, o)
		if err != nil {
			return fmt.Errorf("cell %s: %w", c.ID, err)
		}
		fmt.Fprintf(bw, "cell %s (engine %s)\n", c.ID, c.Params.Engine)
		if cmds == nil {
			fmt.Fprintf(bw, "  xrun's own engine, inside the cell's worker (xrun worker): no external command\n\n")
			continue
		}
		for _, cmd := range cmds {
			note := ""
			switch cmd.Stage {
			case driver.StageBench:
				note = fmt.Sprintf("  # each of %s, in tool/pass-N", plural(p.Spec.Repeats, "repeat"))
			case driver.StageConvert, driver.StageBuild:
				note = "  # once per distinct build, then cached"
			}
			fmt.Fprintf(bw, "  %-8s %s%s\n", cmd.Stage, cmd.String(), note)
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// plannerFor is the driver of an external engine in spec.
func plannerFor(spec *Spec, name string) (driver.Planner, error) {
	d := &decoder{spec: spec}
	pl, err := d.planner(&Params{Engine: name}, nil)
	if err != nil {
		return nil, err
	}
	if pl == nil {
		return nil, fmt.Errorf("engine %s has no driver", strings.TrimSpace(name))
	}
	return pl, nil
}
