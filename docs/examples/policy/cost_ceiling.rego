# The stack's clusters cost at most `max_cost_per_hour` at max_instances (list prices: the plan's `costs`).
# A size whose price infra does not know is not counted: that is a warning, so nobody is surprised.
package main

import rego.v1

max_cost_per_hour := 200

deny contains msg if {
	total := input.costs.total_at_max_instances_hour.after
	total > max_cost_per_hour
	msg := sprintf("the stack's clusters would cost %.2f %s/hour at max_instances, over the ceiling of %d",
		[total, input.costs.currency, max_cost_per_hour])
}

warn contains msg if {
	input.costs.total_at_max_instances_hour.unknown_after > 0
	msg := sprintf("%d cluster(s) have no known price: the cost ceiling does not count them",
		[input.costs.total_at_max_instances_hour.unknown_after])
}
