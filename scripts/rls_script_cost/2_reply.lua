-- Accounting: ours' reply to an admission, { now, 1, remaining, reset }, nothing run.
return { 1, 1, 5, 6 }
