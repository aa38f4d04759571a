"""Pure rules, each written once: what a schedule may hold, when its occurrences fall, what a
claim, a lease, a fence or a finished run decides. The engine and every store only apply them."""
