package nsys

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseKernelSummaryFromStdout(t *testing.T) {
	f, err := os.Open("testdata/stats-stdout.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stats, err := ParseKernelSummary(f, "stats-stdout.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 3 {
		t.Fatalf("%d kernels", len(stats))
	}
	g := stats[0]
	if !strings.HasPrefix(g.Name, "sm90_xmma_gemm") || g.TotalNs != 1234567 || g.Instances != 204 || g.AvgNs != 6051.8 || g.MedNs != 6016 || g.MinNs != 5920 || g.MaxNs != 6912 || g.StdDevNs != 120.4 {
		t.Errorf("first kernel %+v", g)
	}
	if !strings.Contains(stats[2].Name, "generalRmsNorm<__half, float>(__half const*") {
		t.Errorf("a name with commas inside quotes was cut: %q", stats[2].Name)
	}
	var sum float64
	for _, s := range stats {
		sum += s.TimePct
	}
	if sum < 99.99 || sum > 100.01 {
		t.Errorf("shares add up to %v", sum)
	}
}

func TestParseOldKernelSummary(t *testing.T) {
	f, _ := os.Open("testdata/gpukernsum-old.csv")
	defer f.Close()
	stats, err := ParseKernelSummary(f, "old.csv")
	if err != nil {
		t.Fatal(err)
	}
	if stats[0].Name != "kernel_a" || stats[0].AvgNs != 100 || stats[0].MedNs != 0 || stats[0].MinNs != 90 || stats[1].TotalNs != 300 {
		t.Errorf("got %+v", stats)
	}
}

func TestParseKernelSummaryErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SKIPPED: profile.sqlite does not contain CUDA kernel data.\n", "no CUDA kernel data"},
		{"Processing...\n", "x.csv: no kernel summary"},
		{`"Time (%)","Total Time (ns)","Name"` + "\n", "lacks a instances column"},
		{`"Total Time (ns)","Instances","Name"` + "\n" + `"-5","1","k"` + "\n", `x.csv:2: column "Total Time (ns)": "-5" is not a non-negative number`},
		{`"Total Time (ns)","Instances","Name"` + "\n" + `"5","1"` + "\n", "x.csv:2: 2 fields; the header has 3"},
		{`"Total Time (ns)","Instances","Name"` + "\n", "no CUDA kernel data"},
	} {
		_, err := ParseKernelSummary(strings.NewReader(tc.in), "x.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
	if _, err := ParseKernelSummary(strings.NewReader("SKIPPED: r.sqlite does not contain CUDA kernel data.\n"), "x"); !errors.Is(err, ErrNoKernels) {
		t.Errorf("an empty capture is not ErrNoKernels: %v", err)
	}
}

func FuzzParseKernelSummary(f *testing.F) {
	b, _ := os.ReadFile("testdata/stats-stdout.txt")
	f.Add(string(b))
	b, _ = os.ReadFile("testdata/gpukernsum-old.csv")
	f.Add(string(b))
	// A malformed row after the header once panicked the reader.
	f.Add("\"Total Time (ns)\",\"Instances\",\"Name\"\n\"unterminated\n")
	f.Fuzz(func(t *testing.T, in string) {
		stats, err := ParseKernelSummary(strings.NewReader(in), "f")
		if err != nil {
			return
		}
		for i, s := range stats {
			if s.TotalNs < 0 || s.Instances < 0 || s.Name == "" {
				t.Fatalf("accepted %+v", s)
			}
			if i > 0 && stats[i-1].TotalNs < s.TotalNs {
				t.Fatal("not sorted by total time")
			}
		}
	})
}
