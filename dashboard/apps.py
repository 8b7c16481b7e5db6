from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Peakwatch"

    def ready(self):
        from django.db.models.signals import post_delete

        from dashboard.models import Result

        # Removals cascade from runs, commits and repositories without passing through an
        # action: the series they leave are summarised again here.
        post_delete.connect(_forget_result, sender=Result, dispatch_uid="peakwatch-series")


def _forget_result(sender, instance, **kwargs):
    from dashboard import actions

    actions.forget_result(instance)
