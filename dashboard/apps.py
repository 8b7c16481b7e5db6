from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Peakwatch"

    def ready(self):
        from django.db.models.signals import post_delete

        from dashboard.models import Artifact, Result

        # Removals cascade from runs, commits and repositories without passing through an
        # action: the series they leave are summarised again here.
        post_delete.connect(_forget_result, sender=Result, dispatch_uid="peakwatch-series")
        # Their artifacts' rows go with them, and take their files along.
        post_delete.connect(
            _forget_artifact, sender=Artifact, dispatch_uid="peakwatch-artifact-files"
        )


def _forget_result(sender, instance, **kwargs):
    from dashboard import actions

    actions.forget_result(instance)


def _forget_artifact(sender, instance, **kwargs):
    from dashboard import actions

    actions.forget_artifact(instance)
