package produce

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

func TestNewOrderShape(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var total int
	for i := range 200 {
		o := newOrder(rnd, "o-deadbeef-0000001", Customer{ID: DemoCustomerID(i % 50), Name: "Grace Hopper"}, i+1)
		body, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		total += len(body)
		var back map[string]any
		if err := json.Unmarshal(body, &back); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"order_id", "customer", "amount", "currency", "items", "created_at"} {
			if _, ok := back[k]; !ok {
				t.Fatalf("order %s lacks %q", body, k)
			}
		}
		var sum float64
		for _, it := range o.Items {
			sum += float64(it.Qty) * it.Price
		}
		if d := sum - o.Amount; d > 0.006 || d < -0.006 {
			t.Errorf("amount %v != sum of items %v", o.Amount, sum)
		}
	}
	if avg := total / 200; avg < 150 || avg > 300 {
		t.Errorf("average order is %d bytes, want about 200", avg)
	}
}
