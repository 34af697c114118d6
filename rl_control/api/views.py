"""Run API (researchers and admins): list / create, detail, control actions, fork, metrics, alerts."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from typing import Any

import django_filters
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework import serializers as drf_serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from rl_control import fleet_selectors, selectors, services
from rl_control.api import serializers as s
from rl_control.metric_names import metric_catalogue
from rl_control.models import Run, RunAlert, RunAlgorithm, RunMode, RunStatus
from webapp.accounts.permissions import IsResearcherOrAdmin
from webapp.store.models import Checkpoint, Trajectory
from workers.rl.run_config import run_config_schema


def _service_response(
    call: Callable[[], Run], *, serializer: type = s.RunDetailSerializer, code: int = 200
) -> Response:
    """Run a service; map its errors to 400 {field: [messages]}, 409 (illegal transition) or 400."""
    try:
        run = call()
    except services.RunConfigError as exc:
        return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
    except services.RunTransitionError as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    except services.RunError as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
    return Response(serializer(run).data, status=code)


def _launched_if(launch: bool, create: Callable[[], Run]) -> Callable[[], Run]:
    """`create`, then (when asked) launch: a launch the preflight refuses leaves no run behind. Not
    one transaction: the preflight asks other processes, which no transaction may wait on."""

    def call() -> Run:
        run = create()
        if not launch:
            return run
        try:
            return services.run_launch(run=run)
        except Exception:
            run.delete()
            raise

    return call


class RunFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=RunStatus.choices)
    algorithm = django_filters.ChoiceFilter(choices=RunAlgorithm.choices)
    mode = django_filters.ChoiceFilter(choices=RunMode.choices)
    preset = django_filters.CharFilter()
    created_by = django_filters.CharFilter(field_name="created_by__username")
    parent = django_filters.NumberFilter(field_name="parent_id")
    min_success = django_filters.NumberFilter(field_name="headline_success", lookup_expr="gte")

    class Meta:
        model = Run
        fields: list[str] = []


class RunListCreateView(generics.ListAPIView):
    """GET: runs, newest first, filterable. POST: create a run from a preset plus config overrides."""

    permission_classes = [IsResearcherOrAdmin]
    serializer_class = s.RunSerializer
    filterset_class = RunFilter

    def get_queryset(self) -> QuerySet[Run]:
        return selectors.runs_with_alerts(selectors.runs_visible_to(self.request.user))

    @extend_schema(
        request=s.RunCreateInput,
        responses={201: s.RunDetailSerializer, 400: OpenApiTypes.OBJECT},
        description='Errors come back as {"section.field": [message]} (e.g. "grpo.clip_low").',
    )
    def post(self, request: Request) -> Response:
        data = s.RunCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        return _service_response(
            _launched_if(v["launch"], lambda: services.run_create(
                user=request.user, name=v["name"], config=v["config"], preset=v["preset"],
                algorithm=v.get("algorithm"), mode=v.get("mode"), pool=v.get("pool"),
                start_checkpoint=v.get("start_checkpoint"),
            )),
            code=status.HTTP_201_CREATED,
        )  # fmt: skip


class RunDetailView(generics.RetrieveAPIView):
    """The run with its full config, the newest value of every metric series and the alert
    thresholds in force."""

    permission_classes = [IsResearcherOrAdmin]
    serializer_class = s.RunPageSerializer

    def get_queryset(self) -> QuerySet[Run]:
        return selectors.runs_visible_to(self.request.user)


class _RunView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    def _run(self, request: Request, pk: int) -> Run:
        run = selectors.run_get_for_user(user=request.user, run_id=pk)
        if run is None:
            raise NotFound("No such run.")
        return run


class _RunActionView(_RunView):
    """POST moves the run through one transition; 409 with the reason when the status forbids it."""

    service: Callable[..., Run]

    @extend_schema(request=None, responses={200: s.RunDetailSerializer, 409: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        return _service_response(lambda: type(self).service(run=run))


class RunLaunchView(_RunActionView):
    service = services.run_launch


class RunPauseView(_RunActionView):
    service = services.run_pause


class RunResumeView(_RunActionView):
    service = services.run_resume


class RunStopView(_RunActionView):
    service = services.run_stop


class RunForkView(_RunView):
    @extend_schema(request=s.RunForkInput, responses={201: s.RunDetailSerializer, 400: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        data = s.RunForkInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        return _service_response(
            _launched_if(v["launch"], lambda: services.run_fork(
                run=run, user=request.user, checkpoint=v.get("checkpoint"), name=v["name"], config=v["config"]
            )),
            code=status.HTTP_201_CREATED,
        )  # fmt: skip


class RunMetricsView(_RunView):
    @extend_schema(
        parameters=[
            OpenApiParameter("names", OpenApiTypes.STR, required=True, description="Comma-separated metric names."),
            OpenApiParameter("x", OpenApiTypes.STR, enum=list(selectors.X_AXES), description="x axis (default step)."),
            OpenApiParameter("points", OpenApiTypes.INT, description="At most this many points per series (default 1000)."),
        ],
        responses=s.MetricSeriesOutput,
        description="Min/max-downsampled series: every bucket keeps its first, last, lowest and highest point.",
    )  # fmt: skip
    def get(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        data = s.MetricSeriesInput(data=request.query_params)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        return Response(
            selectors.metric_series(run_id=run.pk, names=v["names"], x=v["x"], points=v["points"])
        )


class MetricRecordInput(drf_serializers.Serializer):
    step = drf_serializers.IntegerField(min_value=0)
    values = drf_serializers.DictField(child=drf_serializers.FloatField(), allow_empty=False)
    policy_version = drf_serializers.IntegerField(min_value=0, required=False, default=0)
    samples = drf_serializers.IntegerField(min_value=0, required=False, default=0)

    def validate_values(self, values: dict[str, float]) -> dict[str, float]:
        if len(values) > 500:
            raise drf_serializers.ValidationError("at most 500 values per step")
        return values


class RunMetricsRecordView(_RunView):
    """POST: an external trainer (verl through flywheel_verl.tracking) records one step's scalars on
    the run's dashboard: canonical names (rl_control/metric_names.py), else 400 and nothing stored."""

    @extend_schema(request=MetricRecordInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        data = MetricRecordInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            rows = services.metrics_record(
                run=run,
                step=v["step"],
                values=v["values"],
                policy_version=v["policy_version"],
                samples=v["samples"],
            )
        except services.RunError as exc:
            raise ValidationError({"values": [str(exc)]}) from exc
        return Response({"run_id": run.pk, "step": v["step"], "stored": len(rows)}, status=201)


class RunMetricNamesView(_RunView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        return Response({"run_id": run.pk, "names": selectors.run_metric_names(run_id=run.pk)})


class RunAlertListView(generics.ListAPIView):
    permission_classes = [IsResearcherOrAdmin]
    serializer_class = s.RunAlertSerializer

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no run
            return RunAlert.objects.none()
        if selectors.run_get_for_user(user=self.request.user, run_id=self.kwargs["pk"]) is None:
            raise NotFound("No such run.")
        return selectors.run_alerts(run_id=self.kwargs["pk"])


class EpisodeCursorPagination(CursorPagination):
    ordering = "-id"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class RunEpisodeListView(generics.ListAPIView):
    """The run's episodes (its trajectories), newest first, for episode tables and replay links."""

    permission_classes = [IsResearcherOrAdmin]
    serializer_class = s.EpisodeSerializer
    pagination_class = EpisodeCursorPagination

    def get_queryset(self) -> QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request, no run
            return Trajectory.objects.none()
        if selectors.run_get_for_user(user=self.request.user, run_id=self.kwargs["pk"]) is None:
            raise NotFound("No such run.")
        return selectors.run_episodes(run_id=self.kwargs["pk"])


class PresetListView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(
        parameters=[OpenApiParameter("start_checkpoint", str, description="version of the start checkpoint")],
        responses=s.PresetSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """Each preset's defaults for the chosen start model (?start_checkpoint=<version>; default the
        checkpoint promoted to RL start)."""
        version = request.query_params.get("start_checkpoint", "")
        checkpoint = None
        if version:
            checkpoint = Checkpoint.objects.filter(version=version[:200]).first()
            if checkpoint is None:
                raise ValidationError({"start_checkpoint": [f"no checkpoint {version[:200]!r}"]})
        return Response(selectors.preset_list_for_host(checkpoint))


class ConfigSchemaView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        """{algorithm: JSON schema of its run config}: every field with its label (`title`), help
        (`description`), bounds, choices (`enum`) and default; `x-basic` lists the launch form's basic
        fields, `x-mirrored` the fields it copies from another one."""
        return Response(run_config_schema())


class MetricCatalogueView(APIView):
    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses=s.MetricNameSerializer(many=True))
    def get(self, request: Request, *args: Any) -> Response:
        return Response(metric_catalogue())


class RunEpisodePickView(_RunView):
    """Episodes to replay: latest, best / worst by final reward, or by highest step reward; by task."""

    @extend_schema(parameters=[s.EpisodePickInput], responses=s.EpisodePickSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        data = s.EpisodePickInput(data=request.query_params)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        rows = selectors.run_episodes_pick(run_id=run.pk, which=v["which"], task=v["task"], limit=v["limit"])
        return Response(s.EpisodePickSerializer(rows, many=True).data)


class TrajectoryReplayView(APIView):
    """One trajectory (RL episode or annotation) step by step: screenshots, actions in screen
    pixels, thoughts, rewards and the per-step RL figures."""

    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        trajectory = selectors.trajectory_for_replay(user=request.user, trajectory_id=pk)
        if trajectory is None:
            raise NotFound("No such trajectory.")
        return Response(selectors.trajectory_replay(trajectory=trajectory))


class RunCompareView(APIView):
    """Several runs side by side: each run, and the settings that differ between them."""

    permission_classes = [IsResearcherOrAdmin]

    @extend_schema(parameters=[s.CompareInput], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        data = s.CompareInput(data=request.query_params)
        data.is_valid(raise_exception=True)
        ids = data.validated_data["runs"]
        found = {r.pk: r for r in selectors.runs_visible_to(request.user).filter(pk__in=ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"No such run: {', '.join(map(str, missing))}.")
        runs = [found[i] for i in ids]
        return Response(
            {"runs": s.RunSerializer(runs, many=True).data, "config_diff": selectors.runs_config_diff(runs)}
        )


class _Echo:
    def write(self, value: str) -> str:
        return value


class RunExportCsvView(_RunView):
    """Every stored metric point of the run as CSV: name, step, policy_version, samples, wall_s, value."""

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        run = self._run(request, pk)
        writer = csv.writer(_Echo())

        def lines() -> Iterator[str]:
            yield writer.writerow(["name", "step", "policy_version", "samples", "wall_s", "value"])
            for row in selectors.metric_rows(run_id=run.pk):
                yield writer.writerow([row[0], row[1], row[2], row[3], repr(row[4]), repr(row[5])])

        response = StreamingHttpResponse(lines(), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-metrics.csv"'
        return response


class RunExportTensorBoardView(_RunView):
    """Every stored metric point of the run as one TensorBoard event file (scalars; tag = metric
    name, step = training step, wall time = run start + the point's wall seconds)."""

    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> StreamingHttpResponse:
        # tensorboardX's package imports torch: loaded on the first TensorBoard export only, so the web
        # process does not carry torch (~200 MB) for every request.
        from rl_control.api import tfevents

        run = self._run(request, pk)
        start = (run.started_at or run.created_at).timestamp()
        points = (
            (name, step, wall, value)
            for name, step, _v, _s, wall, value in selectors.metric_rows(run_id=run.pk)
        )
        response = StreamingHttpResponse(
            tfevents.event_file(points, start_time=start), content_type="application/octet-stream"
        )
        response["Content-Disposition"] = (
            f'attachment; filename="events.out.tfevents.{int(start)}.flywheel-run-{run.pk}"'
        )
        return response


class RunCheckpointListView(_RunView):
    """Checkpoints the run produced, newest first (fork from one; admins promote one)."""

    @extend_schema(responses=s.CheckpointRowSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        return Response(
            s.CheckpointRowSerializer(run.checkpoints.order_by("-created_at", "-id"), many=True).data
        )


class RunFleetView(_RunView):
    """The run's environments: live leases with state and boot time, recent ended leases, counts."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        run = self._run(request, pk)
        return Response(fleet_selectors.run_fleet(run_id=run.pk))


class RunLeaseWatchView(_RunView):
    """A read-only VNC proxy URL to watch one live environment of the run (desktops only)."""

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int, lease_id: str) -> Response:
        run = self._run(request, pk)
        lease = fleet_selectors.run_lease(run_id=run.pk, lease_id=lease_id)
        if lease is None:
            raise NotFound("That environment is no longer leased by this run.")
        from webapp.fleet import services as fleet
        from workers.envs.leases import Lease

        try:
            grant = fleet.vnc_token_mint(
                lease=Lease(lease_id=lease_id, env_id=lease.get("env", ""), worker=lease.get("worker", ""),
                            kind=lease.get("kind", ""), owner=lease.get("owner", ""), task=lease.get("task", "")),
                session_key=f"rl:{run.pk}:{request.user.pk}", user_id=request.user.pk, read_only=True,
            )  # fmt: skip
        except fleet.EnvCallFailed as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        except fleet.LeaseLost as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_410_GONE)
        return Response(grant)
