"""Prints two cycles, then waits forever (a collective that never returns, say)."""

import time

for i in range(2):
    print(f"cycle {i} loss=0.5", flush=True)
    time.sleep(0.05)
print("waiting for the other ranks", flush=True)
while True:
    time.sleep(3600)
