package cenv

import (
	"slices"
	"testing"
)

// ncuMaps is part of /proc/self/maps in a process Nsight Compute 2025.3
// launched (ncu --target-processes all), trimmed.
const ncuMaps = `55d0c0a00000-55d0c0a28000 r--p 00000000 fe:00 1234                       /usr/bin/python3.12
7fcd2ce00000-7fcd2ce35000 r--p 00000000 fe:00 2008                       /opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so
7fcd2ce35000-7fcd2d0c5000 r-xp 00035000 fe:00 2008                       /opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so
7fcd2d2ff000-7fcd2d314000 r--p 00000000 fe:00 2009                       /opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetUpdatePreloadInjection.so
7fcd2d400000-7fcd2d428000 r--p 00000000 fe:00 11                         /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]
`

const plainMaps = `7fcd2d400000-7fcd2d428000 r--p 00000000 fe:00 11                         /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]
`

const (
	launcher = "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so"
	update   = "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetUpdatePreloadInjection.so"
)

// TestUnderLauncher: the launcher's libraries say so; nsys's CUDA
// injection alone (no launcher) and an ordinary process do not.
func TestUnderLauncher(t *testing.T) {
	if !UnderLauncher(ncuMaps) {
		t.Error("under ncu: false")
	}
	if UnderLauncher(plainMaps) || UnderLauncher("") {
		t.Error("no tool: true")
	}
}

// TestToolLibs: the launcher's libraries and nsys's CUDA injection say a
// tool is attached; an ordinary process has none.
func TestToolLibs(t *testing.T) {
	if got := ToolLibs(ncuMaps); !slices.Equal(got, []string{launcher, update}) {
		t.Errorf("under ncu: %q", got)
	}
	nsys := "7f00-7f01 r-xp 00000000 fe:00 7 /opt/nvidia/nsight-systems/2025.5.1/target-linux-x64/libToolsInjection64.so\n"
	if got := ToolLibs(nsys); len(got) != 1 {
		t.Errorf("under nsys: %q", got)
	}
	if got := ToolLibs(plainMaps); got != nil {
		t.Errorf("no tool: %q", got)
	}
	if SelfMaps() == "" {
		t.Error("SelfMaps read nothing on Linux")
	}
}
