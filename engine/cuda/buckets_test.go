package cuda

import (
	"slices"
	"testing"
)

func TestGraphBuckets(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 4, 5: 8, 9: 16, 16: 16, 17: 32, 33: 48, 250: 256} {
		if got := GraphBucket(n); got != want {
			t.Errorf("GraphBucket(%d) = %d, want %d", n, got, want)
		}
	}
	for slots, want := range map[int][]int{
		0:   nil,
		1:   {1},
		3:   {1, 2, 3},
		20:  {1, 2, 4, 8, 16, 20},
		64:  {1, 2, 4, 8, 16, 32, 48, 64},
		250: append([]int{1, 2, 4, 8}, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 250),
	} {
		if got := GraphBuckets(slots); !slices.Equal(got, want) {
			t.Errorf("GraphBuckets(%d) = %v, want %v", slots, got, want)
		}
	}
}
