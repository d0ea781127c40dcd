package blocks
import ("testing";"syscall";"time")
func cpuNow() time.Duration { var r syscall.Rusage; syscall.Getrusage(syscall.RUSAGE_SELF, &r); return time.Duration(r.Utime.Nano()+r.Stime.Nano()) }
func TestCPUPerOp(t *testing.T){
	msg := benchMessage(t)
	for _, inter := range []bool{true,false} {
	p := policy(inter)
	best := time.Hour
	for k:=0;k<8;k++{
		n := 10000
		c0 := cpuNow()
		for i:=0;i<n;i++ { Validate(msg,p) }
		d := (cpuNow()-c0)/time.Duration(n)
		if d < best {best = d}
	}
	t.Logf("interactive=%v cpu/op %v", inter, best)
	}
}
