"""A consumer group member in its own process, for tests that kill one with SIGKILL.

Usage: python group_member.py BOOTSTRAP TOPIC GROUP STRATEGY
Prints one JSON line per assignment change: {"assigned": [[topic, partition], ...], "consumed": n}.
"""

import json
import sys

from odradek import Consumer

bootstrap, topic, group, strategy = sys.argv[1:5]
options = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
consumer = Consumer(
    bootstrap_servers=bootstrap, group_id=group, partition_assignment_strategy=[strategy], **options
)
consumer.subscribe([topic])
last = None
consumed = 0
while True:
    consumed += len(consumer.poll(0.2))
    now = sorted(consumer.assignment())
    if now != last:
        last = now
        print(json.dumps({"assigned": now, "consumed": consumed}), flush=True)
