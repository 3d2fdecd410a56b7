"""This repository's example domains, installed only by the reference deployment
(``webhooks_project``): never part of the ``django-reliable-webhooks`` distribution."""
