from django.dispatch import Signal

#: Sent by ``invoice_pay`` inside its transaction, with ``invoice``; bound to
#: ``shop.invoice.paid`` in ``DemoShopConfig.ready``.
invoice_paid = Signal()
