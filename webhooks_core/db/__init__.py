"""The database as the apps use it: our backend (`postgresql`), the SQL we write on hot
paths (`sql`), batches, leased jobs, and the 503 while it is unreachable."""
