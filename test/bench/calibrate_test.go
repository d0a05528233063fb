package main

import (
	"math"
	"testing"
)

func TestWeighSpeed(t *testing.T) {
	for _, tc := range []struct {
		name string
		rs   []speedReading
		want float64
	}{
		{"none", nil, 0},
		{"one reading", []speedReading{{0, 600}}, 600},
		{"no master CPU between them: the plain mean", []speedReading{{5, 600}, {5, 700}}, 650},
		{"one interval: its mean", []speedReading{{0, 600}, {10, 700}}, 650},
		// 10 s at 600 and 30 s in an interval of mean 900: the master's
		// 40 s are worth 10/600 + 30/900 = 1/20 of the work: 800 ms.
		{"weighed by the master's CPU", []speedReading{{0, 600}, {10, 600}, {40, 1200}, {40, 1200}}, 800},
		{"a slow interval with the master idle counts for nothing", []speedReading{{0, 600}, {10, 600}, {10, 5000}}, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := weighSpeed(tc.rs); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("weighSpeed(%v) = %v, want %v", tc.rs, got, tc.want)
			}
		})
	}
}
