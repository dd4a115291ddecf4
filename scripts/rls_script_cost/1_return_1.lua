-- Accounting (scripts/rls_script_cost.py --accounting): EVALSHA with ours' keys and
-- arguments, nothing run, one integer answered.
return 1
