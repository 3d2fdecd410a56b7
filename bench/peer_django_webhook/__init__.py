"""A minimal Django project around django-webhook 0.0.15, the peer `python -m bench` compares
with. It runs only in its own virtualenv (`.bench/peer-venv`, made by `bench.peer_side`),
never in the project's: nothing here is imported by the product or its tests."""
