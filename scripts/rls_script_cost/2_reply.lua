-- Accounting: ours' reply to a fixed window's admission, { now, remaining }, nothing run.
return { 1, 5 }
